// Package clitest helps the tests of idemctl's command packages: a
// TestMain that gives them one temporary directory, and the real idemctl
// binary built once into it (for tests that send it signals, run it in a
// terminal or start it as lab workers). Only tests import it.
package clitest

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
)

var (
	binDir  string // set by Main, removed after the tests
	binOnce sync.Once
	binPath string
	binErr  error
)

// Main runs a package's tests in one temporary directory for the binaries
// they build, removed when they end: nothing is left in /tmp. It also sets
// the password variable of the postgres replay sources the tests add (their
// DSNs never carry one), once, so that the tests stay parallel.
func Main(m *testing.M, pattern string) {
	dbtest.SetSourcePassword()
	dbtest.RunInTempDir(m, pattern, &binDir)
}

// Binary builds the real binary once into the directory of Main.
func Binary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binPath = filepath.Join(binDir, "idemctl")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/idemctl/idemctl/cmd/idemctl").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(t, binErr)
	return binPath
}

// ExecSub runs one command (a NewCmdXxx, usually with a runF that captures
// its options) with args and returns its exit code, as the root would.
func ExecSub(t *testing.T, cmd *cobra.Command, args ...string) int {
	t.Helper()
	cmd.SetArgs(args)
	cmd.SetOut(&strings.Builder{})
	cmd.SetErr(&strings.Builder{})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return &cmdutil.ExitError{Code: cmdutil.ExitUsage, Err: err} })
	if err := cmd.Execute(); err != nil {
		return cmdutil.CodeOf(err)
	}
	return cmdutil.ExitOK
}

// LabSchemas lists the lab's scratch schemas left in the database at dsn.
func LabSchemas(t *testing.T, dsn string) []string {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), `SELECT nspname FROM pg_namespace WHERE nspname LIKE 'idemlab\_%'`)
	require.NoError(t, err)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return names
}
