package resolve

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/recovery"
)

// One operation is "1 operation", not "1 operations".
func TestSummaryLineCounts(t *testing.T) {
	t.Parallel()
	one := summaryLine(recovery.RunSummary{Counts: recovery.Counts{recovery.AlreadyApplied: 1}})
	assert.True(t, strings.HasPrefix(one, "1 operation: 1 already_applied"), one)
	many := summaryLine(recovery.RunSummary{Counts: recovery.Counts{recovery.AlreadyApplied: 1, recovery.Applied: 1203}})
	assert.True(t, strings.HasPrefix(many, "1,204 operations:"), many)
}

// The progress total does not count blank lines (the run itself:
// TestResolveSummaryAndProgressTotal in internal/cli).
func TestDigestFileSkipsBlankLines(t *testing.T) {
	t.Parallel()
	var in strings.Builder
	for i := range cmdutil.MaxAttentionRows + 3 {
		fmt.Fprintf(&in, `{"tenant":"shop","operation_id":"bad-%d","class":"demo.transfer","payload":{"from":"a","to":"a","amount":1,"currency":"EUR"}}`+"\n\n  \n", i)
	}
	file := filepath.Join(t.TempDir(), "batch.ndjson")
	require.NoError(t, os.WriteFile(file, []byte(in.String()), 0o600))
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	lines, _, err := digestFile(f)
	require.NoError(t, err)
	assert.Equal(t, int64(cmdutil.MaxAttentionRows+3), lines, "blank lines are not counted")
}

func TestResolveCommandOptions(t *testing.T) {
	t.Parallel()
	payloadFile := filepath.Join(t.TempDir(), "p.json")
	require.NoError(t, os.WriteFile(payloadFile, []byte(`{"amount": 5}`), 0o600))
	capture := func(args ...string) (*ResolveOptions, int) {
		ios, _, _, errOut := cmdutil.Test(false)
		f := cmdutil.NewFactory(ios)
		f.OperatorFlag = "ada"
		var got *ResolveOptions
		cmd := NewCmdResolve(f, func(o *ResolveOptions) error { got = o; return nil })
		cmd.SetArgs(args)
		cmd.SetOut(ios.Out)
		cmd.SetErr(errOut)
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &cmdutil.ExitError{Code: cmdutil.ExitUsage, Err: err} })
		if err := cmd.Execute(); err != nil {
			return got, cmdutil.CodeOf(err)
		}
		return got, cmdutil.ExitOK
	}

	o, code := capture("--file", "ops.ndjson", "--dry-run", "--concurrency", "2", "--max-rate", "50", "--report", "r.ndjson", "--batch-size", "100")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Equal(t, "ops.ndjson", o.File)
	assert.True(t, o.DryRun)
	assert.Equal(t, 2, o.Concurrency)
	assert.Equal(t, 50.0, o.MaxRate)
	assert.Equal(t, "r.ndjson", o.Report)
	assert.Equal(t, 100, o.BatchSize)
	assert.Equal(t, "ada", o.Operator)
	assert.True(t, o.JSON, "json when stdout is not a terminal")

	o, code = capture("--tenant", "acme", "--op", "charge-42", "--class", "demo.transfer", "--payload", "@"+payloadFile, "--transport", `{"topic":"t"}`)
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Equal(t, recovery.Request{Tenant: "acme", OperationID: "charge-42", Class: "demo.transfer",
		Payload: []byte(`{"amount": 5}`), Transport: []byte(`{"topic":"t"}`)}, o.Request)
	assert.Empty(t, o.File)
	assert.Equal(t, recovery.DefaultConcurrency, o.Concurrency)

	for _, args := range [][]string{
		{},
		{"--file", "x", "--tenant", "t"},
		{"--tenant", "t", "--op", "o", "--class", "c"},
		{"--file", "x", "--concurrency", "0"},
		{"--file", "x", "--concurrency", "65"},
		{"--file", "x", "--max-rate", "-1"},
		{"--file", "x", "--batch-size", "0"},
		{"--file", "x", "--max-bytes", "0"},
		{"--file", "x", "extra"},
		{"--file", "x", "--no-such-flag"},
		{"--file", "x", "--retry-for", "0s"},
		// What a run would answer invalid is a usage error before connecting.
		{"--tenant", "", "--op", "o", "--class", "c", "--payload", "{}"},
		{"--tenant", "t", "--op", "", "--class", "c", "--payload", "{}"},
		{"--tenant", "t", "--op", "o", "--class", " ", "--payload", "{}"},
		{"--tenant", "t", "--op", "o", "--class", "c", "--payload", "{"},
		{"--tenant", "t", "--op", "o", "--class", "c", "--payload", `{"a":1,"a":2}`},
		{"--tenant", "t", "--op", "o", "--class", "c", "--payload", `{"amount":9007199254740993}`},
		{"--tenant", "t", "--op", "o", "--class", "c", "--payload", "{}", "--transport", "[1]"},
		{"--tenant", "t", "--op", "o", "--class", "c", "--payload", "{}", "--max-bytes", "1"},
	} {
		_, code := capture(args...)
		assert.Equal(t, cmdutil.ExitUsage, code, "%v", args)
	}
	// A file that cannot be read is an I/O error, exit 1, as for every
	// command and flag (docs/exit-codes.md).
	_, code = capture("--tenant", "t", "--op", "o", "--class", "c", "--payload", "@/no/such/file")
	assert.Equal(t, cmdutil.ExitFailure, code)
}
