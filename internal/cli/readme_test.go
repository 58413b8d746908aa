package cli

import (
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The README's exit-code tables say what the binary does: every code with
// its meaning, and for every command the codes its --help lists.
func TestREADMEExitCodes(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	readme := string(raw)
	start := strings.Index(readme, "### Exit codes")
	require.GreaterOrEqual(t, start, 0)
	section := readme[start:]
	section = section[:strings.Index(section, "\n## ")]

	var codes []int
	for _, m := range regexp.MustCompile(`(?m)^\| (\d) \| `).FindAllStringSubmatch(section, -1) {
		n, _ := strconv.Atoi(m[1])
		codes = append(codes, n)
	}
	assert.Equal(t, allExitCodes(), codes, "the README's table of codes")

	documented := map[string]string{}
	for _, m := range regexp.MustCompile("(?m)^\\| `idemctl ([a-z -]+)` \\| ([0-9 ]+) \\|$").FindAllStringSubmatch(section, -1) {
		documented[m[1]] = m[2]
	}
	cmds := runnableCommands()
	for key, cmd := range cmds {
		var want []string
		for _, code := range exitCodesOf(cmd) {
			want = append(want, strconv.Itoa(code))
		}
		got, ok := documented[key]
		if assert.True(t, ok, "the README has no exit codes for idemctl %s", key) {
			assert.Equal(t, strings.Join(want, " "), got, "idemctl %s", key)
		}
	}
	assert.Equal(t, len(cmds), len(documented), "the README documents a command the binary does not have")
}

// The README's commands table names every top-level command.
func TestREADMECommandsTable(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	readme := string(raw)
	start := strings.Index(readme, "## Commands")
	table := readme[start:]
	table = table[:strings.Index(table, "\nEvery command has")]
	ios, _, _, _ := Test(false)
	var missing []string
	for _, c := range NewCmdRoot(NewFactory(ios)).Commands() {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		if !strings.Contains(table, "`idemctl "+c.Name()) {
			missing = append(missing, c.Name())
		}
	}
	sort.Strings(missing)
	assert.Empty(t, missing, "commands missing from the README's commands table")
}
