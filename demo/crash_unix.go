//go:build unix

package demo

import "syscall"

// crash ends the process as a power cut would: SIGKILL to itself, no
// deferred function, no reply, no flush.
func crash() { _ = syscall.Kill(syscall.Getpid(), syscall.SIGKILL) }
