package cli

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
)

// A table is fitted to the terminal on the raw text, and the
// terminal escaping (internal/term: U+2028 and U+2029 become \u2028, six
// cells) is applied afterwards by the output stream (cmdutil.IOStreams.Out).
// A cell holding line separators then pushes its row past the terminal: at
// 80 columns, `corrections list` prints a row of 139 cells. U+2028 is not a
// control character (Cc), so an operator's --reason, a quarantine record's
// payload or even a tenant or operation id (the identity rules refuse only
// Cc) carries it. Tables "fit the terminal's width, borders included"
// (docs/setup.md); the fitting should measure what the terminal receives.
func TestTableFitsAfterEscaping(t *testing.T) {
	t.Parallel()
	fx := newCLIFixture(t)
	reason := "refund " + strings.Repeat("\u2028x", 12)
	code, _, errOut := runQ(t, fx.DSN, "corrections", "add", "--tenant", "acme", "--op", "c-1", "--reason", reason, "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	code, out, errOut := runTTY(t, fx.DSN, "", "corrections", "list")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	require.Contains(t, out, `\u2028`, "escaped on the terminal")
	for _, l := range strings.Split(out, "\n") {
		// A word wider than the terminal stands whole on a line of its own
		// (PrintTable: it could not be copied if cut); nothing else passes.
		if !strings.Contains(strings.TrimSpace(l), " ") {
			continue
		}
		assert.LessOrEqual(t, ansi.StringWidth(l), 80, "%q", l)
	}
}

// The line a command prints on stderr when it reaches the database (which
// one, primary or not, the schema) wraps at the terminal's width instead of
// passing it.
func TestHeaderLineFitsTheTerminal(t *testing.T) {
	t.Parallel()
	fx := newCLIFixture(t)
	code, _, errOut := runTTY(t, fx.DSN, "", "quarantine", "list")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	require.Contains(t, errOut, "primary")
	for _, l := range strings.Split(errOut, "\n") {
		if strings.Contains(strings.TrimSpace(l), " ") {
			assert.LessOrEqual(t, ansi.StringWidth(l), 80, "%q", l)
		}
	}
}
