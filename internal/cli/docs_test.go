package cli

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
)

var updateDocs = flag.Bool("update", false, "rewrite docs/exit-codes.md from the exit-code definitions")

// docFiles are README.md and every file of docs/, by path from the
// repository root.
func docFiles(t *testing.T) map[string]string {
	t.Helper()
	paths, err := filepath.Glob("../../docs/*.md")
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	out := map[string]string{}
	for _, p := range append(paths, "../../README.md") {
		raw, err := os.ReadFile(p)
		require.NoError(t, err)
		out[strings.TrimPrefix(p, "../../")] = string(raw)
	}
	return out
}

// docCommandLines finds every command line that starts with "idemctl" in
// text: in code blocks, one line each (a trailing backslash continues it),
// and in inline code spans.
func docCommandLines(text string) []string {
	var out []string
	fence := false
	var cont string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		if fence {
			l := strings.TrimSpace(line)
			if cont != "" {
				l = cont + " " + l
				cont = ""
			}
			if strings.HasSuffix(l, "\\") {
				cont = strings.TrimSuffix(l, "\\")
				continue
			}
			l = strings.TrimPrefix(l, "$ ")
			if strings.HasPrefix(l, "idemctl ") {
				out = append(out, l)
			}
			continue
		}
		for _, m := range regexp.MustCompile("`(idemctl [^`]+)`").FindAllStringSubmatch(line, -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// shellWords splits a command line as a shell would, up to the first pipe,
// redirection, separator or comment; quoted strings are one word.
func shellWords(line string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case r == '|' || r == '>' || r == '<' || r == ';' || r == '&' || r == '#' && !inWord:
			if inWord {
				words = append(words, cur.String())
			}
			return words
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// Every command line in the README and docs/ that starts with idemctl names
// a real command with real flags. A placeholder in capitals (TENANT, ID) or
// an elision (...) stands for an argument.
func TestDocsCommandLines(t *testing.T) {
	t.Parallel()
	ios, _, _, _ := cmdutil.Test(false)
	n := 0
	for path, text := range docFiles(t) {
		for _, line := range docCommandLines(text) {
			words := shellWords(line)[1:]
			var args []string
			for _, w := range words {
				if strings.Contains(w, "...") || strings.Contains(w, "\\|") {
					break // "idemctl horizon ...", "list\|set": a summary, not a command line
				}
				args = append(args, w)
			}
			if len(args) == 0 {
				continue
			}
			root := NewCmdRoot(cmdutil.NewFactory(ios))
			cmd, rest, err := root.Find(args)
			if !assert.NoError(t, err, "%s: %q", path, line) {
				continue
			}
			if cmd == root && len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
				assert.Failf(t, "unknown command", "%s: %q", path, line)
				continue
			}
			cmd.InitDefaultHelpFlag()
			flags := cmd.Flags()
			flags.AddFlagSet(cmd.InheritedFlags())
			assert.NoError(t, flags.Parse(rest), "%s: %q", path, line)
			n++
		}
	}
	assert.Greater(t, n, 100, "the docs' command lines were found")
}

// Every runnable command, and every flag of it, appears in docs/.
func TestDocsCoverEveryCommandAndFlag(t *testing.T) {
	t.Parallel()
	var all strings.Builder
	for path, text := range docFiles(t) {
		if strings.HasPrefix(path, "docs/") {
			all.WriteString(text)
		}
	}
	docs := all.String()
	var missing []string
	for key, cmd := range runnableCommands() {
		if !strings.Contains(docs, "idemctl "+key) {
			missing = append(missing, "idemctl "+key)
		}
		cmd.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if f.Hidden || f.Name == "help" {
				return
			}
			if !regexp.MustCompile(`--` + regexp.QuoteMeta(f.Name) + `\b`).MatchString(docs) {
				missing = append(missing, "idemctl "+key+" --"+f.Name)
			}
		})
	}
	sort.Strings(missing)
	assert.Empty(t, missing, "commands and flags docs/ does not mention")
}

// docs/exit-codes.md is generated from the exit-code definitions (-update
// rewrites it), and no --help holds a hand-written exit-code paragraph:
// its codes and what they mean for it come from the same definitions.
func TestExitCodesDoc(t *testing.T) {
	t.Parallel()
	ios, _, _, _ := cmdutil.Test(false)
	root := NewCmdRoot(cmdutil.NewFactory(ios))
	want := cmdutil.ExitCodesMarkdown(root)
	if *updateDocs {
		require.NoError(t, os.WriteFile("../../docs/exit-codes.md", []byte(want), 0o644))
	}
	got, err := os.ReadFile("../../docs/exit-codes.md")
	require.NoError(t, err)
	assert.Equal(t, want, string(got), "docs/exit-codes.md is stale: go test ./internal/cli -run TestExitCodesDoc -update")

	// resolve, reconcile and intake still explain their codes in prose.
	prose := map[string]bool{"resolve": true, "reconcile": true, "intake": true}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if !prose[cmdutil.CommandKey(c)] {
			assert.NotContains(t, c.Long, "Exit codes:", "idemctl %s: exit codes come from exitWhy", cmdutil.CommandKey(c))
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	code, out, _ := run(t, "", "", "quarantine", "reject", "--help")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, out, "  7  not found")
	assert.Contains(t, out, "here: an unknown id")
}
