package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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

func labSchemas(t *testing.T, dsn string) []string {
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

func TestLabCommandOptions(t *testing.T) {
	t.Parallel()
	parse := func(output string, args ...string) (*LabOptions, int) {
		ios, _, _, _ := Test(false)
		f := NewFactory(ios)
		f.Output = output
		var got *LabOptions
		cmd := NewCmdLab(f, func(o *LabOptions) error { got = o; return nil })
		cmd.SetArgs(args)
		cmd.SetOut(ios.Out)
		cmd.SetErr(ios.ErrOut)
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return &ExitError{Code: ExitUsage, Err: err} })
		err := cmd.Execute()
		if err != nil {
			return nil, CodeOf(err)
		}
		return got, ExitOK
	}

	o, code := parse("auto")
	require.Equal(t, ExitOK, code)
	assert.Equal(t, lab.DefaultTrials, o.Trials)
	assert.Equal(t, lab.DefaultParallel, o.Parallel)
	assert.Equal(t, lab.DesignNames(), o.Designs)
	assert.True(t, o.JSON, "not a terminal: json")

	o, code = parse("table", "--trials", "1000", "--seed", "7", "--designs", "atomic, marker_separate_tx", "--parallel", "2")
	require.Equal(t, ExitOK, code)
	assert.Equal(t, 1000, o.Trials)
	assert.Equal(t, uint64(7), o.Seed)
	assert.Equal(t, []string{"atomic", "marker_separate_tx"}, o.Designs)
	assert.Equal(t, 2, o.Parallel)
	assert.False(t, o.JSON)

	// Without --seed, each run gets its own (printed) seed.
	a, _ := parse("json")
	b, _ := parse("json")
	assert.NotEqual(t, a.Seed, b.Seed)

	o, code = parse("table", "--explain", "redis_inbox")
	require.Equal(t, ExitOK, code)
	assert.Equal(t, "redis_inbox", o.Explain)
	o, code = parse("table", "--redis-server", "/opt/redis/bin/redis-server")
	require.Equal(t, ExitOK, code)
	assert.Equal(t, "/opt/redis/bin/redis-server", o.RedisServer)

	for _, bad := range [][]string{
		{"--explain", "redis_setnx"},
		{"--trials", "0"},
		{"--trials", "100001"},
		{"--trials", "x"},
		{"--parallel", "0"},
		{"--parallel", "17"},
		{"--designs", "atomic,redis_setnx"},
		{"--designs", ","},
		{"--seed", "-1"},
		{"extra"},
	} {
		_, code := parse("json", bad...)
		assert.Equal(t, ExitUsage, code, "%v", bad)
	}
}

func TestLabHelpHidesWorker(t *testing.T) {
	t.Parallel()
	code, out, _ := run(t, "", "", "lab", "--help")
	require.Equal(t, ExitOK, code)
	assert.Contains(t, out, "Examples:")
	assert.Contains(t, out, "--trials 1000 --seed 1")
	assert.NotContains(t, out, "Available Commands", "lab worker is hidden")
	code, out, _ = run(t, "", "", "--help")
	require.Equal(t, ExitOK, code)
	assert.Contains(t, out, "lab ")
}

func TestLabExplain(t *testing.T) {
	t.Parallel()
	code, out, _ := run(t, "", "", "lab", "--explain", "global_key")
	require.Equal(t, ExitOK, code)
	assert.Contains(t, out, "where it breaks:")
	assert.Contains(t, out, "ON CONFLICT (operation_id) DO NOTHING")
	code, out, _ = run(t, "", "", "lab", "--explain", "redis_inbox")
	require.Equal(t, ExitOK, code)
	assert.Contains(t, out, "SET $1 $2 NX EX")
}

func TestLabVerdict(t *testing.T) {
	t.Parallel()
	ok := &lab.Report{Seed: 3, Designs: []lab.DesignReport{
		{Design: "marker_separate_tx", Expected: []string{lab.AnomalyLost}, Lost: 40},
		{Design: "atomic"},
	}}
	assert.NoError(t, labVerdict(ok), "broken designs showing anomalies is the lab working")
	bad := &lab.Report{Seed: 3, Designs: []lab.DesignReport{{Design: "atomic", Doubled: 1}}}
	err := labVerdict(bad)
	require.Error(t, err)
	assert.Equal(t, ExitFailure, CodeOf(err))
	assert.Contains(t, err.Error(), "doubled 1")
	assert.Contains(t, err.Error(), "seed 3")
}

// TestLabRun runs a small lab through the command, with the real binary as
// worker, as JSON and as a table.
func TestLabRun(t *testing.T) {
	// Not parallel: the lab uses more than 8 connections.
	bin := labBinary(t)
	dsn := dbtest.NewDatabase(t)
	runLab := func(output string, args ...string) (int, string, string) {
		ios, _, out, errOut := Test(false)
		f := NewFactory(ios)
		f.DSNFlag, f.Output = dsn, output
		cmd := NewCmdLab(f, func(o *LabOptions) error {
			o.Worker = lab.WorkerCommand{Path: bin, Args: []string{"lab", "worker"}}
			return labRun(context.Background(), o)
		})
		cmd.SetArgs(args)
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		if err := cmd.Execute(); err != nil {
			fmt.Fprintln(errOut, "error:", err)
			return CodeOf(err), out.String(), errOut.String()
		}
		return ExitOK, out.String(), errOut.String()
	}

	code, out, errOut := runLab("json", "--trials", "40", "--seed", "5", "--parallel", "3")
	require.Equal(t, ExitOK, code, errOut)
	assert.Contains(t, errOut, "seed 5")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, len(lab.DesignNames()), out)
	for i, line := range lines {
		var d map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &d), line)
		assert.Equal(t, lab.DesignNames()[i], d["design"])
		for _, k := range []string{"operations", "lost", "doubled", "wrong_response", "missed_conflicts",
			"false_conflicts", "lost_revisions", "trials", "kills", "does", "summary"} {
			assert.Contains(t, d, k, line)
		}
		assert.EqualValues(t, 40, d["trials"])
		assert.EqualValues(t, 5, d["seed"])
		assert.NotEmpty(t, d["kills"])
		if d["design"] == "atomic" {
			for _, k := range lab.AnomalyColumns {
				assert.EqualValues(t, 0, d[k], "atomic %s", k)
			}
		}
	}

	code, out, errOut = runLab("table", "--trials", "10", "--seed", "5", "--designs", "marker_separate_tx,atomic")
	require.Equal(t, ExitOK, code, errOut)
	assert.Contains(t, out, "seed 5")
	assert.Contains(t, out, "MISSED CONFLICTS")
	assert.Contains(t, out, "FALSE CONFLICTS")
	assert.Contains(t, out, "LOST REVISIONS")
	assert.Contains(t, out, "commits the dedup marker, then runs the effect in another transaction; the marker committed", "one line: what it does; what broke")
	assert.Contains(t, out, "marker_separate_tx")
	assert.Contains(t, out, "no anomaly")
	assert.NotContains(t, out, "effect_before_marker")
	assert.Empty(t, labSchemas(t, dsn))
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
	for len(labSchemas(t, dsn)) < len(lab.DesignNames()) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	require.Len(t, labSchemas(t, dsn), len(lab.DesignNames()), stderr.String())
	time.Sleep(time.Second) // into the crash trials
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	err := cmd.Wait()
	var exitErr *exec.ExitError
	require.ErrorAs(t, err, &exitErr, stderr.String())
	assert.Equal(t, ExitFailure, exitErr.ExitCode())
	assert.Contains(t, stderr.String(), "lab interrupted")
	assert.Empty(t, stdout.String(), "no report for an interrupted run")
	assert.Empty(t, labSchemas(t, dsn), stderr.String())
}
