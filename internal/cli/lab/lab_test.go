package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/internal/cli/clitest"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/lab"
)

// TestMain gives the package's tests the directory the idemctl binary (the
// lab's workers) is built into.
func TestMain(m *testing.M) { clitest.Main(m, "idemctl-lab-test-") }

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
	assert.Equal(t, cmdutil.ExitFailure, cmdutil.CodeOf(err))
	assert.Contains(t, err.Error(), "doubled 1")
	assert.Contains(t, err.Error(), "seed 3")
}

// TestLabRun runs a small lab through the command, with the real binary as
// worker, as JSON and as a table.
func TestLabRun(t *testing.T) {
	// Not parallel: its two lab runs use some 30 connections.
	bin := clitest.Binary(t)
	dsn := dbtest.NewDatabase(t)
	runLab := func(output string, args ...string) (int, string, string) {
		ios, _, out, errOut := cmdutil.Test(false)
		f := cmdutil.NewFactory(ios)
		f.DSNFlag, f.Output = dsn, output
		cmd := NewCmdLab(f, func(o *LabOptions) error {
			o.Worker = lab.WorkerCommand{Path: bin, Args: []string{"lab", "worker"}}
			return labRun(context.Background(), o)
		})
		cmd.SetArgs(args)
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		if err := cmd.Execute(); err != nil {
			fmt.Fprintln(errOut, "error:", err)
			return cmdutil.CodeOf(err), out.String(), errOut.String()
		}
		return cmdutil.ExitOK, out.String(), errOut.String()
	}

	// 10 trials: what the command adds (flags, JSON lines, the table) does
	// not depend on the run's size; lab's own tests judge the anomalies. The
	// two runs go at once (each its own run id and scratch schemas): a run
	// mostly waits on its workers.
	type result struct {
		code        int
		out, errOut string
	}
	var asJSON, asTable result
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		asJSON.code, asJSON.out, asJSON.errOut = runLab("json", "--trials", "10", "--seed", "5", "--parallel", "3")
	}()
	go func() {
		defer wg.Done()
		asTable.code, asTable.out, asTable.errOut = runLab("table", "--trials", "10", "--seed", "5", "--designs", "marker_separate_tx,atomic")
	}()
	wg.Wait()

	code, out, errOut := asJSON.code, asJSON.out, asJSON.errOut
	require.Equal(t, cmdutil.ExitOK, code, errOut)
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
		assert.EqualValues(t, 10, d["trials"])
		assert.EqualValues(t, 5, d["seed"])
		assert.NotEmpty(t, d["kills"])
		if d["design"] == "atomic" {
			for _, k := range lab.AnomalyColumns {
				assert.EqualValues(t, 0, d[k], "atomic %s", k)
			}
		}
	}

	code, out, errOut = asTable.code, asTable.out, asTable.errOut
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, out, "seed 5")
	assert.Contains(t, out, "MISSED CONFLICTS")
	assert.Contains(t, out, "FALSE CONFLICTS")
	assert.Contains(t, out, "LOST REVISIONS")
	assert.Contains(t, out, "commits the dedup marker, then runs the effect in another transaction; the marker committed", "one line: what it does; what broke")
	assert.Contains(t, out, "marker_separate_tx")
	assert.Contains(t, out, "no anomaly")
	assert.NotContains(t, out, "effect_before_marker")
	assert.Empty(t, clitest.LabSchemas(t, dsn))
}

func TestLabCommandOptions(t *testing.T) {
	t.Parallel()
	parse := func(output string, args ...string) (*LabOptions, int) {
		ios, _, _, _ := cmdutil.Test(false)
		f := cmdutil.NewFactory(ios)
		f.Output = output
		var got *LabOptions
		cmd := NewCmdLab(f, func(o *LabOptions) error { got = o; return nil })
		cmd.SetArgs(args)
		cmd.SetOut(ios.Out)
		cmd.SetErr(ios.ErrOut)
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return &cmdutil.ExitError{Code: cmdutil.ExitUsage, Err: err} })
		err := cmd.Execute()
		if err != nil {
			return nil, cmdutil.CodeOf(err)
		}
		return got, cmdutil.ExitOK
	}

	o, code := parse("auto")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Equal(t, lab.DefaultTrials, o.Trials)
	assert.Equal(t, lab.DefaultParallel, o.Parallel)
	assert.Equal(t, lab.DesignNames(), o.Designs)
	assert.True(t, o.JSON, "not a terminal: json")

	o, code = parse("table", "--trials", "1000", "--seed", "7", "--designs", "atomic, marker_separate_tx", "--parallel", "2")
	require.Equal(t, cmdutil.ExitOK, code)
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
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Equal(t, "redis_inbox", o.Explain)
	o, code = parse("table", "--redis-server", "/opt/redis/bin/redis-server")
	require.Equal(t, cmdutil.ExitOK, code)
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
		assert.Equal(t, cmdutil.ExitUsage, code, "%v", bad)
	}
}
