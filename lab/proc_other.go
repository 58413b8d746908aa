//go:build !unix

package lab

import (
	"os"
	"os/exec"
)

// ownProcessGroup: without process groups a child shares the console's
// interrupt; the lab stops its children itself either way.
func ownProcessGroup(*exec.Cmd) {}

// killPID kills process pid at once.
func killPID(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}

// processAlive: where FindProcess opens a handle (Windows), a process that
// has exited cannot be found.
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	_, err := os.FindProcess(pid)
	return err == nil
}
