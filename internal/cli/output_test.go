package cli

import (
	"fmt"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
)

func maxLineWidth(s string) int {
	w := 0
	for _, l := range strings.Split(s, "\n") {
		w = max(w, ansi.StringWidth(l))
	}
	return w
}

// -o wide and --no-headers reach the tables of a real command; -o accepts
// nothing else.
func TestOutputFlags(t *testing.T) {
	t.Parallel()
	code, _, errOut := run(t, "", "", "hash", "-o", "yaml")
	assert.Equal(t, cmdutil.ExitUsage, code)
	assert.Contains(t, errOut, "use table, wide or json")

	fx := newCLIFixture(t)
	q := fx.Conflict(t, "acme-payments-eu-west-with-a-long-tenant-name", "charge-2026-11-30-000000000042-retry-after-timeout", 1, 2)
	code, _, errOut = runQ(t, fx.DSN, "quarantine", "reject", fmt.Sprint(q), "--yes", "--operator", "alice",
		"--reason", "the retry changed the amount after a timeout; the first attempt was applied and settled with the provider")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	onTerminal := func(args ...string) string {
		code, out, errOut := runTTY(t, fx.DSN, "", args...)
		require.Equal(t, cmdutil.ExitOK, code, errOut)
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
