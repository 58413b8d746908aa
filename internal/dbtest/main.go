package dbtest

import (
	"fmt"
	"os"
	"testing"
)

// RunInTempDir runs a package's tests with a temporary directory in *dir
// (for the binaries they build), removes it when they end, so that nothing
// is left in /tmp, and exits with the tests' code.
func RunInTempDir(m *testing.M, pattern string, dir *string) {
	d, err := os.MkdirTemp("", pattern)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	*dir = d
	code := m.Run()
	os.RemoveAll(d)
	os.Exit(code)
}
