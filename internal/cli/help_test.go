package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
)

// helpPaths lists the path of every command a user can ask --help of, the
// root ("") and the groups included, hidden helpers left out.
func helpPaths() [][]string {
	ios, _, _, _ := cmdutil.Test(false)
	var out [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		out = append(out, path)
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			walk(sub, append(append([]string(nil), path...), sub.Name()))
		}
	}
	walk(NewCmdRoot(cmdutil.NewFactory(ios)), nil)
	return out
}

// helpAt runs `idemctl <path> --help` with stdout a terminal of width
// columns (0: a pipe).
func helpAt(t *testing.T, width int, path []string) string {
	t.Helper()
	ios, _, out, errOut := cmdutil.Test(width > 0)
	if width > 0 {
		ios.SetWidth(width)
	}
	f := cmdutil.NewFactory(ios)
	defer f.Close()
	code := Run(context.Background(), f, append(append([]string(nil), path...), "--help"))
	require.Equal(t, cmdutil.ExitOK, code, "%v: %s", path, errOut.String())
	return out.String()
}

// overLong returns the lines of text wider than width cells.
func overLong(text string, width int) []string {
	var long []string
	for _, l := range strings.Split(text, "\n") {
		if ansi.StringWidth(l) > width {
			long = append(long, l)
		}
	}
	return long
}

// Every command's --help fits an 80-column terminal (and a pipe, which gets
// 80 columns too): the flag lists and exit codes wrap, the long texts and
// examples are written to fit.
func TestHelpFitsEightyColumns(t *testing.T) {
	t.Parallel()
	paths := helpPaths()
	require.Greater(t, len(paths), 40, "the whole tree was walked")
	for _, path := range paths {
		for _, width := range []int{80, 0} {
			out := helpAt(t, width, path)
			require.Contains(t, out, "Exit codes:", path)
			assert.Empty(t, overLong(out, 80), "idemctl %s --help at width %d", strings.Join(path, " "), width)
		}
	}
	// What wraps still says all it said: the global -o line, whole.
	out := helpAt(t, 80, []string{"hash"})
	assert.Contains(t, strings.Join(strings.Fields(out), " "),
		"output format: table (fits the terminal), wide (every cell whole) or json (default: table on a terminal, json otherwise)")
	assert.Contains(t, strings.Join(strings.Fields(helpAt(t, 80, []string{"resolve"})), " "),
		"6 pending: re-driven and not recorded yet, through a stream or by a service that asked to wait (run it again later)")
}

// On a wider terminal the lists use the room: the global -o line, 163
// columns unwrapped, takes two lines at 120 (three at 80), and no line passes
// 120.
func TestHelpUsesAWiderTerminal(t *testing.T) {
	t.Parallel()
	linesOf := func(out, needle string) int {
		lines := strings.Split(out, "\n")
		for i, l := range lines {
			if strings.Contains(l, needle) {
				n := 1
				for _, next := range lines[i+1:] {
					if !strings.HasPrefix(next, "      ") || strings.HasPrefix(strings.TrimSpace(next), "-") {
						break
					}
					n++
				}
				return n
			}
		}
		return 0
	}
	wide, narrow := helpAt(t, 120, []string{"hash"}), helpAt(t, 80, []string{"hash"})
	assert.Empty(t, overLong(wide, 120))
	assert.Equal(t, 2, linesOf(wide, "--output string"), wide)
	assert.Equal(t, 3, linesOf(narrow, "--output string"), narrow)
	assert.NotEmpty(t, overLong(wide, 80), "120 columns are used")
	for _, path := range helpPaths() {
		assert.Empty(t, overLong(helpAt(t, 120, path), 120), "idemctl %s --help at width 120", strings.Join(path, " "))
	}
}

// A group given a subcommand it does not hold is a usage error (exit 2,
// naming the word and the group), not its help with exit 0; the group alone
// still prints its help and succeeds.
func TestUnknownSubcommandOfAGroupIsAUsageError(t *testing.T) {
	ios, _, stdout, errOut := cmdutil.Test(false)
	f := cmdutil.NewFactory(ios)
	defer f.Close()
	code := Run(context.Background(), f, []string{"horizon", "purg"})
	assert.Equal(t, cmdutil.ExitUsage, code)
	assert.Empty(t, stdout.String(), "no help on stdout for a typo: a script reading it would take it for output")
	assert.Contains(t, errOut.String(), `unknown command "purg" for "idemctl horizon"`)
	assert.Contains(t, errOut.String(), "Run 'idemctl horizon --help' for usage.")

	ios, _, out, _ := cmdutil.Test(false)
	g := cmdutil.NewFactory(ios)
	defer g.Close()
	assert.Equal(t, cmdutil.ExitOK, Run(context.Background(), g, []string{"horizon"}))
	assert.Contains(t, out.String(), "Available Commands")
}
