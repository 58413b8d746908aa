package cli

import (
	"bytes"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func maxLineWidth(s string) int {
	w := 0
	for _, l := range strings.Split(s, "\n") {
		w = max(w, ansi.StringWidth(l))
	}
	return w
}

// A table wider than the terminal fits it: the explanatory column wraps
// (nothing of it is lost), the others are shortened with "…".
func TestTableFitsTheTerminal(t *testing.T) {
	t.Parallel()
	header := []string{"line", "tenant", "operation_id", "outcome", "detail"}
	why := "NOT proven: source kafka-dlq could not be probed (dial tcp 10.0.0.7:9092: i/o timeout); a source that cannot be probed proves nothing"
	rows := [][]string{{"12", "acme-payments-eu-west", "charge-2026-11-30-000000000042-retry", "error", why}}

	var wide bytes.Buffer
	require.NoError(t, printTable(&layoutWriter{Writer: &wide, layout: tableLayout{}}, header, rows))
	assert.Greater(t, maxLineWidth(wide.String()), 80, "without a limit, every cell whole")
	assert.Contains(t, wide.String(), why)

	var fit bytes.Buffer
	require.NoError(t, printTable(&layoutWriter{Writer: &fit, layout: tableLayout{Width: 80}}, header, rows))
	assert.LessOrEqual(t, maxLineWidth(fit.String()), 80, fit.String())
	flat := strings.Join(strings.Fields(strings.ReplaceAll(fit.String(), "│", " ")), " ")
	for _, word := range strings.Fields(why) {
		assert.Contains(t, flat, word, "the explanatory column wraps, whole")
	}
	assert.Contains(t, fit.String(), "…", "a shortened column says so")
	assert.Contains(t, fit.String(), "12")

	var bare bytes.Buffer
	require.NoError(t, printTable(&layoutWriter{Writer: &bare, layout: tableLayout{NoHeaders: true}}, header, rows))
	assert.NotContains(t, strings.ToLower(bare.String()), "operation_id")
	assert.Contains(t, bare.String(), "acme-payments-eu-west")

	// A table that fits is left alone.
	small := [][]string{{"1", "acme", "c-1", "applied", "ok"}}
	assert.Equal(t, small, fitTable(header, small, 80))
}

// -o wide and --no-headers reach the tables of a real command; -o accepts
// nothing else.
func TestOutputFlags(t *testing.T) {
	t.Parallel()
	code, _, errOut := run(t, "", "", "hash", "-o", "yaml")
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errOut, "use table, wide or json")

	fx := newCLIFixture(t)
	q := fx.conflict(t, "acme-payments-eu-west-with-a-long-tenant-name", "charge-2026-11-30-000000000042-retry-after-timeout", 1, 2)
	code, _, errOut = runQ(t, fx.dsn, "quarantine", "reject", fmt.Sprint(q), "--yes", "--operator", "alice",
		"--reason", "the retry changed the amount after a timeout; the first attempt was applied and settled with the provider")
	require.Equal(t, ExitOK, code, errOut)
	onTerminal := func(args ...string) string {
		code, out, errOut := runTTY(t, fx.dsn, "", args...)
		require.Equal(t, ExitOK, code, errOut)
		return out
	}
	fitted := onTerminal("audit", "list", "-o", "table")
	assert.LessOrEqual(t, maxLineWidth(fitted), 80, fitted)
	wide := onTerminal("audit", "list", "-o", "wide")
	assert.Greater(t, maxLineWidth(wide), 80, wide)
	bare := onTerminal("audit", "list", "-o", "wide", "--no-headers")
	assert.NotContains(t, bare, "ACTOR")
	assert.Contains(t, wide, "ACTOR")
}

// Without a terminal, a long run logs one plain progress line per interval
// (no bar, no carriage return); with interval 0, nothing.
func TestProgressLinesWithoutATerminal(t *testing.T) {
	t.Parallel()
	ios, _, _, errOut := Test(false)
	var n atomic.Int64
	p := startProgress(ios, "resolve", 20000, n.Load, 20*time.Millisecond)
	require.NotNil(t, p)
	n.Store(5152)
	time.Sleep(120 * time.Millisecond)
	p.Stop()
	out := errOut.String()
	assert.NotContains(t, out, "\r")
	assert.NotContains(t, out, "[")
	assert.Contains(t, out, "resolve: progress 5,152/20,000 (26%)")
	assert.GreaterOrEqual(t, strings.Count(out, "\n"), 2, out)

	assert.Nil(t, startProgress(ios, "resolve", 1, n.Load, 0))
	var none *progressBar
	none.Stop()
}
