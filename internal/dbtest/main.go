package dbtest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// RunInTempDir runs a package's tests with a temporary directory in *dir
// (for the binaries they build), removes it when they end, so that nothing
// is left in /tmp, and exits with the tests' code. XDG_STATE_HOME points
// into it, so that what a command keeps for its user (audit verify's
// anchors) never lands in the home directory.
func RunInTempDir(m *testing.M, pattern string, dir *string) {
	d, err := os.MkdirTemp("", pattern)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	*dir = d
	os.Setenv("XDG_STATE_HOME", filepath.Join(d, "state"))
	os.Unsetenv("IDEMCTL_AUDIT_ANCHOR_FILE")
	code := m.Run()
	os.RemoveAll(d)
	os.Exit(code)
}
