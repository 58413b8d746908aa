package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
)

// Every `idemctl ...` the schema's functions say (in an error's message or
// hint, which idemctl prints as the next thing to type; comments left out)
// is a command of the tree: words are followed down the tree
// while the command reached is a group, and a word that is none of its
// subcommands is a command that does not exist.
func TestSchemaNamesRealCommands(t *testing.T) {
	t.Parallel()
	ios, _, _, _ := cmdutil.Test(false)
	root := NewCmdRoot(cmdutil.NewFactory(ios))
	files, err := filepath.Glob(filepath.Join("..", "..", "migrations", "code", "*.sql"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	mention := regexp.MustCompile(`idemctl((?: [a-z][a-z-]*)+)`)
	comment := regexp.MustCompile(`(?m)^\s*--.*$`)
	n := 0
	for _, path := range files {
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		code := comment.ReplaceAllString(string(raw), "")
		for _, m := range mention.FindAllStringSubmatch(code, -1) {
			n++
			if bad := unknownCommand(root, strings.Fields(m[1])); bad != "" {
				assert.Failf(t, "no such command", "%s names %q: %q is no command", filepath.Base(path), m[0], bad)
			}
		}
	}
	assert.Greater(t, n, 30, "the schema's mentions of idemctl were found")
}

// unknownCommand follows words down from root and returns the command
// path that does not exist, or "" when they name a command (the words
// left after a runnable command are its arguments or prose).
func unknownCommand(root *cobra.Command, words []string) string {
	cur, path := root, "idemctl"
	for _, w := range words {
		if !cur.HasSubCommands() {
			return ""
		}
		var next *cobra.Command
		for _, c := range cur.Commands() {
			if c.Name() == w || c.HasAlias(w) {
				next = c
			}
		}
		path += " " + w
		if next == nil {
			if cur.Runnable() && cur != root {
				return ""
			}
			return path
		}
		cur = next
	}
	return ""
}
