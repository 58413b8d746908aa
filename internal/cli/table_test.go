package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	labcmd "github.com/idemctl/idemctl/internal/cli/lab"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/lab"
)

// Identifiers of the table fixture: an operation id of 100 characters and
// a tenant, a source and a reason in CJK (two cells a character).
var (
	tableLongOp  = "settlement-2026-11-30-" + strings.Repeat("0123456789", 7) + "-retry-ab"
	tableTenant  = "東京決済-テナント"
	tableSource  = "archive-eu-west-1.dead-letter-and-cold-storage"
	tableCJKText = "二重送信の疑い: 返金済み、再実行しないこと"
)

// tableRun is one command line of the table test: its arguments (with
// %[n]s standing for the fixture's ids), the login it runs as, and the
// identifiers its output must show whole.
type tableRun struct {
	args  []string
	as    string // "" alice, "bob"
	stdin string // the answers to its questions
	whole []string
	// render, when set, prints the table without a database.
	render func(ios *cmdutil.IOStreams) error
}

// noTable are the runnable commands that print no table, and what they
// print instead. Every other runnable command must have a tableRun.
var noTable = map[string]string{
	"hash": "one hash", "version": "one line", "tui": "a screen of its own (tui tests)",
	"demo init": "one line", "demo serve": "an HTTP server",
	"quarantine export": "JSON", "quarantine reject": "a line a record (its previews are covered by reject --group)",
	"quarantine bulk run": "progress lines", "quarantine bulk abort": "one line",
	"audit verify": "one line", "horizon source add": "one line", "horizon source remove": "one line",
	"horizon purge": "progress and one line", "horizon cancel": "one line", "horizon maintain": "one line", "class set": "one line",
	"corrections add": "one line", "corrections done": "one line", "person add": "one line",
	"person remove": "one line", "redrive allow": "one line", "redrive disallow": "one line",
	"intake": "NDJSON lines and a count", "redrive list": "one host a line",
	"record approve": "record plan's table (showEntry), covered there", "record run": "record plan's table (showEntry), covered there",
	"import plan": "record plan's table (showEntry), covered there", "import approve": "record plan's table (showEntry), covered there",
	"import run":   "record plan's table (showEntry), covered there",
	"import abort": "record plan's table (showEntry), covered there", "record abort": "record plan's table (showEntry), covered there",
	"change show": "the change's lines", "change approve": "the change's lines", "change abort": "the change's lines",
}

// Every command that prints a table, found by walking the command tree, is
// rendered at 80 and 120 columns from a fixture holding a 100-character
// operation id and CJK text: no line is wider than the terminal (but for an
// identifier standing alone on its line, the vertical layout's way to keep
// it whole), every identifier appears whole, and every column's role is
// declared (cmdutil.HasColumnRole).
func TestEveryTableFitsTheTerminal(t *testing.T) {
	t.Parallel()
	fx := newCLIFixture(t)
	dsn := fx.DSN
	bob := dbtest.As(dsn, dbtest.Operator2)
	ctx := context.Background()
	q1 := fx.Conflict(t, tableTenant, tableLongOp, 1, 2)
	q2 := fx.Conflict(t, tableTenant, tableLongOp+"-2", 1, 3)
	mustRun := func(dsn string, args ...string) string {
		t.Helper()
		code, out, errOut := runQ(t, dsn, args...)
		require.Equal(t, cmdutil.ExitOK, code, "%v: %s", args, errOut)
		return out
	}
	mustRun(dsn, "quarantine", "reject", fmt.Sprint(q2), "--yes", "--reason", tableCJKText)
	group := jsonLines(t, mustRun(dsn, "quarantine", "groups", "-o", "json"))[0]["id"].(string)
	plan := jsonLines(t, mustRun(dsn, "quarantine", "accept-as-new", "--group", group, "--rule", "{operation_id}-rev2",
		"--max", "5", "--reason", tableCJKText, "-o", "json"))[0]
	bulk := fmt.Sprint(plan["id"])

	dbtest.RegisterAppClass(t, dsn, "proj.view", "forever")
	dbtest.Seed(t, dsn, "proj.view", tableTenant, "op-", 4, 10*24*time.Hour, time.Hour)
	// Making it horizon is planned; bob's approval applies it.
	set := jsonLines(t, mustRun(dsn, "class", "set", "proj.view", "--retention", "horizon", "--min-age", "1d", "--reason", tableCJKText, "--yes", "-o", "json"))[0]
	mustRun(bob, "change", "approve", fmt.Sprint(set["change_id"]), "--operator", "bob", "--yes")
	mustRun(dsn, "corrections", "add", "--tenant", tableTenant, "--op", tableLongOp, "--reason", tableCJKText)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.ndjson"),
		[]byte(fmt.Sprintf(`{"tenant":%q,"operation_id":%q,"ts":"2026-01-01T00:00:00Z"}`+"\n", tableTenant, tableLongOp)), 0o644))
	mustRun(dsn, "horizon", "source", "add", tableSource, "--kind", "archive", "--dir", dir)
	hp := jsonLines(t, mustRun(dsn, "horizon", "plan", "--class", "proj.view", "--before", "5d", "-o", "json"))[0]
	hplan := fmt.Sprint(hp["id"])
	hp2 := jsonLines(t, mustRun(dsn, "horizon", "plan", "--class", "proj.view", "--before", "5d", "-o", "json"))[0]

	report := filepath.Join(dir, "report.csv")
	require.NoError(t, os.WriteFile(report, []byte("merchant,reference,amount_minor,currency\n"+
		tableTenant+","+tableLongOp+",7,EUR\n"), 0o600))
	two := rsvFile(t, rsvLine(tableTenant, tableLongOp, 9), rsvLine(tableTenant, tableLongOp+"-new", 5))
	_ = ctx
	// A governed change (the removal of a source), and plans of identities
	// recorded by hand: one to approve, one approved to run.
	mustRun(dsn, "horizon", "source", "add", tableSource+"-old", "--kind", "archive", "--dir", dir)
	mustRun(dsn, "horizon", "source", "remove", tableSource+"-old", "--reason", tableCJKText)
	entries := filepath.Join(t.TempDir(), "entries.ndjson")
	require.NoError(t, os.WriteFile(entries, []byte(fmt.Sprintf(`{"tenant_id":%q,"operation_id":%q,"class":"demo.transfer",`+
		`"payload":{"to":"bob","from":"alice","amount":900,"currency":"EUR"},"response":{"status":"charged"},"evidence":"psp ch_9"}`+"\n",
		tableTenant, tableLongOp+"-rec")), 0o644))
	recordPlan := func() string {
		out := mustRun(dsn, "record", "plan", "--file", entries, "--reason", tableCJKText, "--correction", "LC-12", "-o", "json")
		return fmt.Sprint(jsonLines(t, out)[0]["id"])
	}
	rplan := recordPlan()

	// Two operations that differ only in their operation id: suspects.
	for _, op := range []string{tableLongOp + "-s1", tableLongOp + "-s2"} {
		mustRun(dsn, "resolve", "--tenant", tableTenant, "--op", op, "--class", "demo.transfer",
			"--payload", `{"from":"alice","to":"carol","amount":77,"currency":"EUR"}`)
	}

	runs := map[string][]tableRun{
		"suspects":                 {{args: []string{"suspects", "--since", "1h"}, whole: []string{tableLongOp + "-s1", tableLongOp + "-s2"}}},
		"change list":              {{args: []string{"change", "list"}, whole: []string{tableSource + "-old"}}},
		"record plan":              {{args: []string{"record", "plan", "--file", entries, "--reason", "x", "--correction", "LC-12"}, whole: []string{entries, tableLongOp + "-rec", tableTenant}}},
		"record list":              {{args: []string{"record", "list"}, whole: []string{rplan}}},
		"record show":              {{args: []string{"record", "show", rplan}, whole: []string{rplan, tableLongOp + "-rec", tableTenant}}},
		"quarantine list":          {{args: []string{"quarantine", "list", "--status", "all"}, whole: []string{tableLongOp, tableTenant}}},
		"quarantine show":          {{args: []string{"quarantine", "show", fmt.Sprint(q1)}, whole: []string{tableLongOp, tableTenant}}},
		"quarantine groups":        {{args: []string{"quarantine", "groups"}, whole: []string{group}}},
		"quarantine accept-as-new": {{args: []string{"quarantine", "accept-as-new", "--group", group, "--rule", "{operation_id}-rev3", "--max", "5", "--reason", "x", "--dry-run"}, whole: []string{tableLongOp}}},
		"quarantine bulk show":     {{args: []string{"quarantine", "bulk", "show", bulk}, whole: []string{bulk, fmt.Sprint(q1), tableLongOp + "-rev2"}}},
		"quarantine bulk approve":  {{args: []string{"quarantine", "bulk", "approve", bulk}, as: "bob", stdin: "n\n", whole: []string{fmt.Sprint(q1), tableLongOp + "-rev2"}}},
		"audit list":               {{args: []string{"audit", "list"}, whole: []string{"quarantine.reject"}}},
		"inspect": {
			{args: []string{"inspect", "--tenant", tableTenant, "--op", tableLongOp}, whole: []string{tableLongOp, tableTenant}},
			{args: []string{"inspect", "--tenant", tableTenant, "--op", tableLongOp, "--history"}, whole: []string{fmt.Sprint(q1)}},
		},
		"horizon source list": {{args: []string{"horizon", "source", "list"}, whole: []string{tableSource}}},
		"horizon check":       {{args: []string{"horizon", "check", "--class", "proj.view", "--before", "5d"}, whole: []string{tableSource}}},
		"horizon plan":        {{args: []string{"horizon", "plan", "--class", "proj.view", "--before", "5d"}, whole: []string{tableSource, "proj.view"}}},
		"horizon status": {
			{args: []string{"horizon", "status"}, whole: []string{hplan, "proj.view"}},
			{args: []string{"horizon", "status", hplan}, whole: []string{hplan, tableSource}},
		},
		"horizon approve":  {{args: []string{"horizon", "approve", fmt.Sprint(hp2["id"])}, as: "bob", stdin: "n\n", whole: []string{tableSource}}},
		"class list":       {{args: []string{"class", "list"}, whole: []string{"proj.view", "demo.transfer"}}},
		"corrections list": {{args: []string{"corrections", "list"}, whole: []string{tableLongOp, tableTenant}}},
		"person list":      {{args: []string{"person", "list"}, whole: []string{dbtest.PersonOperator2}}},
		"status":           {{args: []string{"status"}, whole: []string{"proj.view", tableSource}}},
		"doctor":           {{args: []string{"doctor"}}},
		"migrate":          {{args: []string{"migrate", "--status"}}},
		"demo run":         {{args: []string{"demo", "run"}}},
		"resolve": {
			{args: []string{"resolve", "--tenant", tableTenant, "--op", tableLongOp, "--class", "demo.transfer",
				"--payload", `{"from":"alice","to":"bob","amount":1,"currency":"EUR"}`}, whole: []string{tableLongOp, tableTenant}},
			{args: []string{"resolve", "--file", two, "--dry-run"}, whole: []string{tableLongOp}},
		},
		"reconcile": {{args: []string{"reconcile", "--class", "demo.transfer", "--key", "tenant=merchant,operation_id=reference",
			"--compare", "/amount=amount_minor,/currency=currency", "--report", report}, whole: []string{tableLongOp, tableLongOp + "-s1", tableLongOp + "-s2"}}},
		"lab": {{render: func(ios *cmdutil.IOStreams) error {
			return labcmd.PrintLabTable(&labcmd.LabOptions{IO: ios}, &lab.Report{Seed: 1, Trials: 3, RunID: "r-1", Designs: []lab.DesignReport{
				{Design: "marker_separate_tx", Operations: 1000, Lost: 12, Trials: 3}, {Design: "atomic", Operations: 1000, Trials: 3}}})
		}, whole: []string{"marker_separate_tx"}}},
	}

	var missing []string
	for key := range runnableCommands() {
		_, table := runs[key]
		_, none := noTable[key]
		if !table && !none {
			missing = append(missing, key)
		}
	}
	sort.Strings(missing)
	require.Empty(t, missing, "commands with neither a table run nor a reason to print none")

	keys := make([]string, 0, len(runs))
	for k := range runs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, width := range []int{80, 120} {
		for _, key := range keys {
			for _, r := range runs[key] {
				login := dsn
				if r.as == "bob" {
					login = bob
				}
				out, headers := runAtWidth(t, width, login, r)
				name := fmt.Sprintf("%s at %d: %v", key, width, r.args)
				assert.NotEmpty(t, headers, "%s printed no table", name)
				for _, h := range headers {
					for _, c := range h {
						ok := cmdutil.HasColumnRole(c)
						assert.True(t, ok, "%s: column %q has no declared role (columnRoles)", name, c)
					}
				}
				for _, l := range strings.Split(out, "\n") {
					if ansi.StringWidth(l) > width && !isFixtureIdentifier(l, r.whole) && !isOneWholeWord(l) {
						assert.Failf(t, "wider than the terminal", "%s: %d cells: %q\n%s", name, ansi.StringWidth(l), l, out)
					}
				}
				if os.Getenv("TABLE_DUMP") != "" {
					t.Logf("%s\n%s", name, out)
				}
				for _, id := range r.whole {
					assert.Contains(t, out, id, "%s: the identifier whole\n%s", name, out)
				}
			}
		}
	}
}

// isFixtureIdentifier reports whether line is one identifier alone (the
// vertical layout's line for an identifier wider than the terminal).
// isOneWholeWord says whether line is a list's value that is one word wider
// than the room (a DSN, a path, a hash), printed whole on its own line,
// after its label or the indent: the terminal folds it, and it copies whole.
func isOneWholeWord(line string) bool {
	f := strings.Fields(line)
	return len(f) == 1 || len(f) == 2 && strings.HasSuffix(f[0], ":")
}

func isFixtureIdentifier(line string, ids []string) bool {
	for _, id := range append(ids, tableLongOp, tableLongOp+"-2", tableLongOp+"-new") {
		if line == id {
			return true
		}
	}
	return false
}

// runAtWidth runs r on terminal streams width cells wide and returns the
// tables it printed (on stdout and stderr) and the header of each.
func runAtWidth(t *testing.T, width int, dsn string, r tableRun) (string, [][]string) {
	t.Helper()
	ios, in, _, errOut := cmdutil.Test(true)
	in.WriteString(r.stdin)
	ios.SetWidth(width)
	var headers [][]string
	var tables strings.Builder
	seen := func(h []string, text string) {
		headers = append(headers, append([]string(nil), h...))
		tables.WriteString(text)
	}
	ios.Out = &cmdutil.LayoutWriter{Writer: ios.Out, Layout: cmdutil.TableLayout{Width: width}, Seen: seen}
	ios.ErrOut = &cmdutil.LayoutWriter{Writer: ios.ErrOut, Layout: cmdutil.TableLayout{Width: width}, Seen: seen}
	if r.render != nil {
		require.NoError(t, r.render(ios))
		return tables.String(), headers
	}
	f := cmdutil.NewFactory(ios)
	defer f.Close()
	code := Run(context.Background(), f, append(append([]string(nil), r.args...), "-o", "table", "--dsn", dsn))
	assert.Contains(t, []int{cmdutil.ExitOK, cmdutil.ExitFailure, cmdutil.ExitConflict, cmdutil.ExitInvalid}, code, "%v: %s", r.args, errOut.String())
	return tables.String(), headers
}
