//go:build !unix

package idemhttp_test

import "os"

// crashNow ends the test's server process at once, deferred functions unrun.
func crashNow() { os.Exit(137) }
