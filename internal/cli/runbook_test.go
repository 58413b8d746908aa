package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// runbookBlock is a code block of the README's runbook: its command lines,
// and the output block printed after it, if any.
type runbookBlock struct {
	commands []string
	output   []string
}

// runbookBlocks reads the README's "## Runbook" section.
func runbookBlocks(t *testing.T) []runbookBlock {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	s := string(raw)
	start := strings.Index(s, "## Runbook")
	require.GreaterOrEqual(t, start, 0)
	s = s[start:]
	s = s[:strings.Index(s, "\n## Reference")]
	var blocks []runbookBlock
	var cur []string
	fence, isSh := false, false
	for _, line := range strings.Split(s, "\n") {
		switch {
		case strings.HasPrefix(line, "```") && !fence:
			fence, isSh, cur = true, line == "```sh", nil
		case strings.HasPrefix(line, "```"):
			fence = false
			if isSh {
				blocks = append(blocks, runbookBlock{commands: cur})
			} else if len(blocks) > 0 {
				blocks[len(blocks)-1].output = cur
			}
		case fence:
			cur = append(cur, line)
		}
	}
	return blocks
}

// The runbook's commands run against the demo database as the README shows
// them (alice, and bob where it says so), with the outcome it describes;
// each line of an expected output that does not depend on the clock, the
// database's name or a hash is printed as shown.
func TestREADMERunbook(t *testing.T) {
	t.Parallel()
	fx := newCLIFixture(t)
	bob := dbtest.As(fx.DSN, dbtest.Operator2)
	dir := t.TempDir()
	code, _, errOut := runQ(t, fx.DSN, "demo", "run", "--tenant", "demo", "--op", "charge-42")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	var batch []string
	for _, op := range []struct {
		id     string
		amount int
	}{{"charge-42", 1250}, {"charge-43", 700}, {"charge-44", 990}} {
		batch = append(batch, fmt.Sprintf(`{"tenant":"demo","operation_id":%q,"class":"demo.transfer","payload":{"from":"alice","to":"bob","amount":%d,"currency":"EUR"}}`, op.id, op.amount))
	}
	ambiguous := filepath.Join(dir, "ambiguous.ndjson")
	require.NoError(t, os.WriteFile(ambiguous, []byte(strings.Join(batch, "\n")+"\n"), 0o600))
	// A projection class purgeable by horizon, with an archive that proves it.
	dbtest.RegisterAppClass(t, fx.DSN, "proj.view", "forever")
	dbtest.Seed(t, fx.DSN, "proj.view", "t1", "op-", 8, 40*24*time.Hour, time.Hour)
	code, _, errOut = runQ(t, fx.DSN, "class", "set", "proj.view", "--retention", "horizon", "--min-age", "1d", "--reason", "a projection", "--yes")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	code, _, errOut = runQ(t, bob, "change", "approve", "1", "--operator", "bob", "--yes") // planned: bob applies it
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	archive := t.TempDir()
	code, _, errOut = runQ(t, fx.DSN, "horizon", "source", "add", "archive", "--kind", "archive", "--dir", archive)
	require.Equal(t, cmdutil.ExitOK, code, errOut)

	vars := map[string]string{}
	lastToken := ""
	tokenRE := regexp.MustCompile(`pv-[0-9a-f]{32}`)
	n := 0
	for _, b := range runbookBlocks(t) {
		var printed strings.Builder
		for _, line := range b.commands {
			words := shellWords(line)
			if len(words) == 1 && strings.Contains(words[0], "=") {
				k, v, _ := strings.Cut(words[0], "=")
				if v == "pv-..." { // the token the preview just printed
					v = lastToken
				}
				vars["$"+k] = v
				continue
			}
			if len(words) == 0 || words[0] != "idemctl" {
				continue
			}
			dsn := fx.DSN
			var args []string
			for i := 1; i < len(words); i++ {
				w := words[i]
				switch {
				case w == "--dsn" && i+1 < len(words) && words[i+1] == "service=demo-bob":
					dsn = bob
					i++
					continue
				case vars[w] != "":
					w = vars[w]
				case w == "ambiguous.ndjson":
					w = ambiguous
				case w == "resolve-report.ndjson":
					w = filepath.Join(dir, w)
				}
				args = append(args, w)
			}
			code, out, errOut := runTTY(t, dsn, "y\n", args...) // a person answers yes
			assert.Contains(t, []int{cmdutil.ExitOK, cmdutil.ExitConflict}, code, "%s\n%s%s", line, out, errOut)
			printed.WriteString(out + errOut)
			if tok := tokenRE.FindString(out + errOut); tok != "" {
				lastToken = tok
			}
			n++
		}
		for _, want := range b.output {
			if varies(want) {
				continue
			}
			assert.Contains(t, printed.String(), want, "the README's output of %q", b.commands)
		}
	}
	assert.GreaterOrEqual(t, n, 15, "the runbook's commands ran")
}

// varies reports whether an expected output line depends on the clock, the
// database, a hash or the run (or elides what follows).
func varies(line string) bool {
	return strings.Contains(line, "...") || strings.Contains(line, "@") || strings.Contains(line, "sha256") ||
		regexp.MustCompile(`\d\d:\d\d|\d+s ago|^idemctl: `).MatchString(line) || strings.TrimSpace(line) == "" ||
		strings.HasPrefix(line, "│     ") || strings.HasPrefix(line, "┌") || strings.HasPrefix(line, "├") || strings.HasPrefix(line, "└")
}
