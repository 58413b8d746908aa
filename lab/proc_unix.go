//go:build unix

package lab

import (
	"errors"
	"os/exec"
	"syscall"
)

// ownProcessGroup puts cmd in a process group of its own: a Ctrl-C on the
// terminal reaches the lab only, which then stops its children itself.
func ownProcessGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// killPID kills process pid at once (SIGKILL).
func killPID(pid int) { _ = syscall.Kill(pid, syscall.SIGKILL) }

func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
