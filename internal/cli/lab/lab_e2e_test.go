package lab_test

import (
	"bytes"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/clitest"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/internal/lockedbuf"
	"github.com/idemctl/idemctl/lab"
)

// labBinary is the idemctl binary: the lab's workers are `idemctl lab worker`
// processes, which the test binary cannot be.
func labBinary(t *testing.T) string {
	t.Helper()
	return idemctlBinary(t)
}

func TestLabHelpHidesWorker(t *testing.T) {
	t.Parallel()
	code, out, _ := run(t, "", "", "lab", "--help")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, out, "Examples:")
	assert.Contains(t, out, "--trials 1000 --seed 1")
	assert.NotContains(t, out, "Available Commands", "lab worker is hidden")
	code, out, _ = run(t, "", "", "--help")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, out, "lab ")
}

func TestLabExplain(t *testing.T) {
	t.Parallel()
	code, out, _ := run(t, "", "", "lab", "--explain", "global_key")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, out, "where it breaks:")
	assert.Contains(t, out, "ON CONFLICT (operation_id) DO NOTHING")
	code, out, _ = run(t, "", "", "lab", "--explain", "redis_inbox")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, out, "SET $1 $2 NX EX")
}

// TestLabInterrupted sends SIGINT to `idemctl lab` in the middle of its crash
// trials: it must stop with exit 1 and leave no scratch schema behind.
func TestLabInterrupted(t *testing.T) {
	bin := labBinary(t)
	dsn := dbtest.NewDatabase(t)
	cmd := exec.Command(bin, "lab", "--trials", "5000", "--seed", "1", "--parallel", "2", "-o", "json")
	cmd.Env = append(os.Environ(), "IDEMCTL_DSN="+dsn)
	// The process writes stderr from exec's copying goroutine while the
	// test reads it: a locked buffer.
	var stdout bytes.Buffer
	var stderr lockedbuf.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	deadline := time.Now().Add(30 * time.Second)
	for len(clitest.LabSchemas(t, dsn)) < len(lab.DesignNames()) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	require.Len(t, clitest.LabSchemas(t, dsn), len(lab.DesignNames()), stderr.String())
	time.Sleep(time.Second) // into the crash trials
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	err := cmd.Wait()
	var exitErr *exec.ExitError
	require.ErrorAs(t, err, &exitErr, stderr.String())
	assert.Equal(t, cmdutil.ExitFailure, exitErr.ExitCode())
	assert.Contains(t, stderr.String(), "lab interrupted")
	assert.Empty(t, stdout.String(), "no report for an interrupted run")
	assert.Empty(t, clitest.LabSchemas(t, dsn), stderr.String())
}
