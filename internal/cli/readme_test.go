package cli

import (
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
)

// The README's commands table names every top-level command.
func TestREADMECommandsTable(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	readme := string(raw)
	start := strings.Index(readme, "## Commands")
	table := readme[start:]
	table = table[:strings.Index(table, "\nEvery command has")]
	ios, _, _, _ := cmdutil.Test(false)
	var missing []string
	for _, c := range NewCmdRoot(cmdutil.NewFactory(ios)).Commands() {
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
