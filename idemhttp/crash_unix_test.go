//go:build unix

package idemhttp_test

import "syscall"

// crashNow ends the test's server process as a power cut would (SIGKILL).
func crashNow() { _ = syscall.Kill(syscall.Getpid(), syscall.SIGKILL) }
