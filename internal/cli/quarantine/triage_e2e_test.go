package quarantine_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// TestQuarantineTriageCommands: groups, a bulk reject of a group with its
// dry run, ids on stdin, totals; nothing is written by a refusal.
func TestQuarantineTriageCommands(t *testing.T) {
	t.Parallel()
	fx := newCLIFixture(t)
	dbtest.SeedConflicts(t, fx.DSN,
		dbtest.ClientBug{Prefix: "m-", Tenants: 3, N: 30, Change: "amount", Source: "mobile"},
		dbtest.ClientBug{Prefix: "w-", Tenants: 2, N: 20, Change: "currency", Source: "web"})

	code, out, _ := runQ(t, fx.DSN, "quarantine", "groups", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code)
	groups := jsonLines(t, out)
	require.Len(t, groups, 2)
	assert.Equal(t, float64(30), groups[0]["count"])
	web := groups[1]["id"].(string)

	code, out, _ = runQ(t, fx.DSN, "quarantine", "list", "--changed", "/currency", "--count", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code)
	totals := jsonLines(t, out)[0]
	assert.Equal(t, float64(20), totals["matching"])
	assert.NotEmpty(t, totals["oldest_open"])
	code, _, errOut := runQ(t, fx.DSN, "quarantine", "list", "--source", "web", "--limit", "5", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, errOut, "20 open quarantine record(s) match")
	assert.Contains(t, errOut, "more records: add --after ")

	code, out, errOut = runQ(t, fx.DSN, "quarantine", "reject", "--group", web, "--reason", "web bug", "--dry-run", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, out, `"open":20`)
	assert.Contains(t, errOut, "dry run: nothing decided")
	assert.Equal(t, 0, fx.Count(t, "SELECT count(*) FROM idem.quarantine WHERE status <> 'open'"))

	code, _, errOut = runQ(t, fx.DSN, "quarantine", "reject", "--group", web, "--reason", "web bug", "--yes")
	assert.Equal(t, cmdutil.ExitUsage, code, "--yes without a token decides nothing")
	assert.Contains(t, errOut, "--token")
	token := previewToken(t, fx.DSN, "", "quarantine", "reject", "--group", web, "--reason", "web bug")
	assert.Equal(t, 0, fx.Count(t, "SELECT count(*) FROM idem.quarantine WHERE status <> 'open'"), "a preview decides nothing")
	code, out, errOut = runQ(t, fx.DSN, "quarantine", "reject", "--token", token, "--reason", "web bug", "--yes", "--batch", "7", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, out, `"decided":20`)
	assert.Contains(t, errOut, "rejected 7 of 20")
	assert.Contains(t, errOut, "rejected 20 of 20")
	assert.Equal(t, 20, fx.Count(t, "SELECT count(*) FROM idem.quarantine WHERE status = 'rejected' AND operation_id LIKE 'w-%'"))
	assert.Equal(t, 20, fx.Count(t, "SELECT count(*) FROM idem.audit WHERE action = 'quarantine.reject'"))
	code, out, _ = runQ(t, fx.DSN, "audit", "verify", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, out, `"intact":true`)

	// Ids on stdin: an unknown id refuses the whole run.
	ids := dbtest.Column[string](t, fx.Pool, "SELECT id::text FROM idem.quarantine WHERE operation_id LIKE 'm-%' ORDER BY id LIMIT 3")
	code, _, errOut = run(t, fx.DSN, strings.Join(append(ids, "999999"), "\n"), "quarantine", "reject", "-", "--reason", "x")
	assert.Equal(t, cmdutil.ExitNotFound, code)
	assert.Contains(t, errOut, "999999")
	assert.Equal(t, 20, fx.Count(t, "SELECT count(*) FROM idem.quarantine WHERE status <> 'open'"))
	code, _, errOut = runQ(t, fx.DSN, "quarantine", "reject", ids[0], "--reason", "x", "--dry-run")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, errOut, "dry run: would reject record "+ids[0])
	assert.Equal(t, 20, fx.Count(t, "SELECT count(*) FROM idem.quarantine WHERE status <> 'open'"), "a dry run decides nothing")
	token = previewToken(t, fx.DSN, strings.Join(ids, "\n"), "quarantine", "reject", "-", "--reason", "dupes")
	code, _, errOut = runQ(t, fx.DSN, "quarantine", "reject", "--token", token, "--reason", "dupes", "--yes")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Equal(t, 23, fx.Count(t, "SELECT count(*) FROM idem.quarantine WHERE status <> 'open'"))
	// Again: nothing left to decide, exit 0.
	code, _, errOut = run(t, fx.DSN, strings.Join(ids, "\n"), "quarantine", "reject", "-", "--reason", "dupes")
	assert.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, errOut, "nothing to reject")

	// The audit log pages with --after, as the quarantine list does.
	code, _, errOut = runQ(t, fx.DSN, "audit", "list", "--limit", "5", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, errOut, "add --after ")
}

// previewToken runs a bulk preview and returns the token it printed.
func previewToken(t *testing.T, dsn, stdin string, args ...string) string {
	t.Helper()
	code, out, errOut := run(t, dsn, stdin, append(args, "-o", "json")...)
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	token, _ := jsonLines(t, out)[0]["token"].(string)
	require.Regexp(t, `^pv-[0-9a-f]{32}$`, token, out)
	return token
}

// A bulk reject acts only on what its preview showed: records that joined
// the group since are named and left open; an unknown, used, expired or
// another person's token exits 2 and decides nothing.
func TestBulkRejectActsOnlyOnThePreview(t *testing.T) {
	t.Parallel()
	fx := newCLIFixture(t)
	dbtest.SeedConflicts(t, fx.DSN, dbtest.ClientBug{Prefix: "g-", N: 9, Change: "amount", Source: "mobile"})
	code, out, _ := runQ(t, fx.DSN, "quarantine", "groups", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code)
	group := jsonLines(t, out)[0]["id"].(string)
	bob := dbtest.As(fx.DSN, dbtest.Operator2)
	token := previewToken(t, fx.DSN, "", "quarantine", "reject", "--group", group, "--reason", "INC-7")
	// Five unrelated records of the same cause arrive after the preview.
	dbtest.SeedConflicts(t, fx.DSN, dbtest.ClientBug{Prefix: "late-", N: 5, Change: "amount", Source: "mobile"})
	require.Equal(t, 14, fx.Count(t, "SELECT count(*) FROM idem.quarantine WHERE status = 'open'"))

	refused := func(name, dsn, token string) {
		t.Helper()
		open := fx.Count(t, "SELECT count(*) FROM idem.quarantine WHERE status = 'open'")
		code, _, errOut := runQ(t, dsn, "quarantine", "reject", "--token", token, "--reason", "INC-7", "--yes")
		assert.Equal(t, cmdutil.ExitUsage, code, "%s: %s", name, errOut)
		assert.Equal(t, open, fx.Count(t, "SELECT count(*) FROM idem.quarantine WHERE status = 'open'"), name)
	}
	refused("unknown", fx.DSN, "pv-00000000000000000000000000000000")
	refused("another person's", bob, token)
	code, out, errOut := runQ(t, fx.DSN, "quarantine", "reject", "--token", token, "--reason", "INC-7", "--yes", "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, out, "Rejected 9 record(s) of the preview")
	assert.Contains(t, out, "5 records joined the group after the preview: not decided")
	assert.Equal(t, 5, fx.Count(t, "SELECT count(*) FROM idem.quarantine WHERE status = 'open' AND operation_id LIKE 'late-%'"))
	refused("used", fx.DSN, token)
	expired := previewToken(t, fx.DSN, "", "quarantine", "reject", "--group", group, "--reason", "INC-7")
	dbtest.Admin(t, fx.DSN, "UPDATE idem.bulk_preview SET expires_at = now() - interval '1 second' WHERE token = $1", expired)
	refused("expired", fx.DSN, expired)
}

// TestQuarantineBulkAcceptCommands: a bulk accept-as-new is a plan that runs
// nothing until another person approves it; then each record runs once.
func TestQuarantineBulkAcceptCommands(t *testing.T) {
	t.Parallel()
	fx := newCLIFixture(t)
	dbtest.SeedConflicts(t, fx.DSN, dbtest.ClientBug{Prefix: "r-", N: 6, Change: "amount", Source: "settle"})
	bob := dbtest.As(fx.DSN, dbtest.Operator2)
	postings := fx.Count(t, "SELECT count(*) FROM demo.posting")

	code, _, errOut := runQ(t, fx.DSN, "quarantine", "accept-as-new", "--source", "settle", "--rule", "{operation_id}-rev2",
		"--max", "5", "--reason", "revisions")
	assert.Equal(t, cmdutil.ExitInvalid, code, "over the cap")
	assert.Contains(t, errOut, "over --max 5")
	code, out, errOut := runQ(t, fx.DSN, "quarantine", "accept-as-new", "--source", "settle", "--rule", "{operation_id}-rev2",
		"--max", "6", "--reason", "revisions", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	plan := jsonLines(t, out)[0]
	id := fmt.Sprint(plan["id"])
	assert.Equal(t, "planned", plan["state"])
	assert.Equal(t, "alice", plan["planned_person"])
	assert.Equal(t, postings, fx.Count(t, "SELECT count(*) FROM demo.posting"), "planning runs nothing")

	code, _, errOut = runQ(t, fx.DSN, "quarantine", "bulk", "run", id, "--yes")
	assert.Equal(t, cmdutil.ExitInvalid, code, "not approved")
	assert.Contains(t, errOut, "only an approved plan runs")
	code, _, errOut = runQ(t, fx.DSN, "quarantine", "bulk", "approve", id, "--operator", "not-alice", "--yes")
	assert.Equal(t, cmdutil.ExitInvalid, code, "the planner cannot approve, whatever the label")
	assert.Contains(t, errOut, "four-eyes")
	code, _, errOut = runQ(t, bob, "quarantine", "bulk", "approve", id)
	assert.Equal(t, cmdutil.ExitUsage, code, "no terminal to ask on, no --yes")
	assert.Contains(t, errOut, "--yes (-y)")
	code, _, errOut = runQ(t, bob, "quarantine", "bulk", "approve", "999999", "--yes")
	assert.Equal(t, cmdutil.ExitNotFound, code, errOut)
	code, _, errOut = runQ(t, bob, "quarantine", "bulk", "approve", id, "--yes")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	code, out, errOut = runQ(t, fx.DSN, "quarantine", "bulk", "run", id, "--yes", "--batch", "4", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, out, `"decided":6`)
	assert.Equal(t, postings+6, fx.Count(t, "SELECT count(*) FROM demo.posting"), "each payload ran once")
	assert.Equal(t, 6, fx.Count(t, "SELECT count(*) FROM idem.inbox WHERE operation_id LIKE 'r-%-rev2'"))
	assert.Equal(t, 6, fx.Count(t, `SELECT count(*) FROM idem.audit WHERE action = 'quarantine.accept_as_new'
		AND details::jsonb ->> 'approved_person' = 'bob'`))
	code, out, _ = runQ(t, fx.DSN, "quarantine", "bulk", "show", id, "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, out, `"state":"done"`)
	code, _, _ = runQ(t, fx.DSN, "quarantine", "bulk", "run", id, "--yes")
	assert.Equal(t, cmdutil.ExitInvalid, code, "a done plan runs nothing again")
	assert.Equal(t, postings+6, fx.Count(t, "SELECT count(*) FROM demo.posting"))
}

func TestTriageHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"quarantine", "groups", "--help"}, {"quarantine", "bulk", "--help"}, {"quarantine", "bulk", "run", "--help"},
		{"quarantine", "bulk", "approve", "--help"}, {"quarantine", "bulk", "show", "--help"}, {"quarantine", "bulk", "abort", "--help"},
	} {
		code, out, _ := runQ(t, "", args...)
		require.Equal(t, cmdutil.ExitOK, code)
		assert.Contains(t, out, "Examples:", args)
		assert.Contains(t, out, "Exit codes:", args)
	}
	_, out, _ := runQ(t, "", "quarantine", "reject", "--help")
	for _, flag := range []string{"--group", "--dry-run", "--changed", "--op-prefix", "--source", "--until", "--batch"} {
		assert.Contains(t, out, flag)
	}
}
