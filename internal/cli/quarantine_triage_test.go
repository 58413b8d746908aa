package cli

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/audit"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	quarantinecmd "github.com/idemctl/idemctl/internal/cli/quarantine"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/quarantine"
)

func TestQuarantineTriageOptions(t *testing.T) {
	t.Parallel()
	ios, in, _, _ := cmdutil.Test(false)
	f := cmdutil.NewFactory(ios)
	f.OperatorFlag = "alice"
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	f.Now = func() time.Time { return now }

	var list *quarantinecmd.QuarantineListOptions
	require.Equal(t, cmdutil.ExitOK, execSub(t, quarantinecmd.NewCmdQuarantineList(f, func(o *quarantinecmd.QuarantineListOptions) error { list = o; return nil }),
		"--op-prefix", "s-06", "--changed", "/amount", "--source", "mobile", "--class", "payments.charge",
		"--since", "2h", "--until", "1h", "--count"))
	assert.Equal(t, quarantine.Filter{Status: quarantine.StatusOpen, OpPrefix: "s-06", Changed: "/amount", Source: "mobile",
		Class: "payments.charge", Since: now.Add(-2 * time.Hour), Until: now.Add(-time.Hour), Limit: quarantine.DefaultLimit}, list.Filter)
	assert.True(t, list.Count)
	require.Equal(t, cmdutil.ExitOK, execSub(t, quarantinecmd.NewCmdQuarantineList(f, func(o *quarantinecmd.QuarantineListOptions) error { list = o; return nil }),
		"--op", "s-06376", "--tenant", "acme"))
	assert.Equal(t, "s-06376", list.Filter.Op)

	var groups *quarantinecmd.QuarantineGroupsOptions
	require.Equal(t, cmdutil.ExitOK, execSub(t, quarantinecmd.NewCmdQuarantineGroups(f, func(o *quarantinecmd.QuarantineGroupsOptions) error { groups = o; return nil }),
		"--by", "tenant,source", "--changed", "/to", "--limit", "20"))
	assert.Equal(t, quarantine.GroupBy{Tenant: true, Source: true}, groups.Groups.By)
	assert.Equal(t, "/to", groups.Groups.Filter.Changed)
	assert.Equal(t, 20, groups.Groups.Limit)

	var reject *quarantinecmd.QuarantineRejectOptions
	rejectCmd := func() *cobra.Command {
		return quarantinecmd.NewCmdQuarantineReject(f, func(o *quarantinecmd.QuarantineRejectOptions) error { reject = o; return nil })
	}
	require.Equal(t, cmdutil.ExitOK, execSub(t, rejectCmd(), "--group", "g-0123456789ab", "--reason", "INC-1", "--dry-run"))
	assert.Equal(t, "g-0123456789ab", reject.Group)
	assert.True(t, reject.DryRun)
	assert.Zero(t, reject.ID)
	require.Equal(t, cmdutil.ExitOK, execSub(t, rejectCmd(), "--changed", "/amount", "--class", "c", "--reason", "INC-1", "--batch", "50"))
	assert.Equal(t, "/amount", reject.Selection.Filter.Changed)
	assert.Equal(t, 50, reject.Batch)
	in.WriteString("42\n#43\n\n{\"id\":44,\"tenant\":\"t\"}\n")
	require.Equal(t, cmdutil.ExitOK, execSub(t, rejectCmd(), "-", "--reason", "INC-1"))
	assert.Equal(t, []int64{42, 43, 44}, reject.Selection.IDs)
	require.Equal(t, cmdutil.ExitOK, execSub(t, rejectCmd(), "--token", "pv-0123", "--reason", "INC-1", "--yes", "--batch", "50"))
	assert.Equal(t, "pv-0123", reject.Token)
	// A command line from shell history decides nothing: --yes needs a token.
	assert.Equal(t, cmdutil.ExitUsage, execSub(t, rejectCmd(), "--group", "g-0123456789ab", "--reason", "INC-1", "--yes"))
	assert.Equal(t, cmdutil.ExitUsage, execSub(t, rejectCmd(), "--token", "pv-0123", "--group", "g-0123456789ab", "--reason", "INC-1", "--yes"))

	var accept *quarantinecmd.QuarantineAcceptOptions
	require.Equal(t, cmdutil.ExitOK, execSub(t, quarantinecmd.NewCmdQuarantineAccept(f, func(o *quarantinecmd.QuarantineAcceptOptions) error { accept = o; return nil }),
		"--group", "gs-0123456789ab", "--rule", "{operation_id}-rev2", "--max", "100", "--reason", "revisions"))
	require.NotNil(t, accept.Bulk)
	assert.Equal(t, quarantinecmd.QuarantineAcceptPlanOptions{Group: "gs-0123456789ab", Rule: "{operation_id}-rev2", Max: 100,
		Selection: quarantine.Selection{Filter: quarantine.Filter{}}}, *accept.Bulk)

	var bulk *quarantinecmd.QuarantineBulkOptions
	require.Equal(t, cmdutil.ExitOK, execSub(t, quarantinecmd.NewCmdQuarantineBulkAction(f, "run", func(o *quarantinecmd.QuarantineBulkOptions) error { bulk = o; return nil }),
		"7", "--yes", "--batch", "10"))
	assert.Equal(t, int64(7), bulk.ID)
	assert.Equal(t, 10, bulk.Batch)

	var auditList *audit.AuditListOptions
	require.Equal(t, cmdutil.ExitOK, execSub(t, audit.NewCmdAuditList(f, func(o *audit.AuditListOptions) error { auditList = o; return nil }), "--after", "120"))
	assert.Equal(t, int64(120), auditList.Filter.Before, "--after is the audit cursor")

	bad := []struct {
		name  string
		cmd   *cobra.Command
		stdin string
		args  []string
	}{
		{"list pointer without /", quarantinecmd.NewCmdQuarantineList(f, nil), "", []string{"--changed", "amount"}},
		{"list op and prefix", quarantinecmd.NewCmdQuarantineList(f, nil), "", []string{"--op", "a", "--op-prefix", "b"}},
		{"list since after until", quarantinecmd.NewCmdQuarantineList(f, nil), "", []string{"--since", "1h", "--until", "2h"}},
		{"list bad until", quarantinecmd.NewCmdQuarantineList(f, nil), "", []string{"--until", "soon"}},
		{"groups bad by", quarantinecmd.NewCmdQuarantineGroups(f, nil), "", []string{"--by", "colour"}},
		{"groups zero limit", quarantinecmd.NewCmdQuarantineGroups(f, nil), "", []string{"--limit", "0"}},
		{"reject nothing named", quarantinecmd.NewCmdQuarantineReject(f, nil), "", []string{"--reason", "x"}},
		{"reject id and filter", quarantinecmd.NewCmdQuarantineReject(f, nil), "", []string{"42", "--tenant", "t", "--reason", "x"}},
		{"reject stdin and filter", quarantinecmd.NewCmdQuarantineReject(f, nil), "1\n", []string{"-", "--tenant", "t", "--reason", "x", "--yes"}},
		{"reject bad group", quarantinecmd.NewCmdQuarantineReject(f, nil), "", []string{"--group", "g-12", "--reason", "x", "--yes"}},
		{"reject bulk with --yes and no token", quarantinecmd.NewCmdQuarantineReject(f, nil), "", []string{"--tenant", "t", "--reason", "x", "--yes"}},
		{"reject bulk without reason", quarantinecmd.NewCmdQuarantineReject(f, nil), "", []string{"--tenant", "t", "--yes"}},
		{"reject empty stdin", quarantinecmd.NewCmdQuarantineReject(f, nil), "", []string{"-", "--reason", "x", "--yes"}},
		{"reject bad stdin line", quarantinecmd.NewCmdQuarantineReject(f, nil), "1\nabc\n", []string{"-", "--reason", "x", "--yes"}},
		{"reject zero id on stdin", quarantinecmd.NewCmdQuarantineReject(f, nil), "0\n", []string{"-", "--reason", "x", "--yes"}},
		{"reject huge batch", quarantinecmd.NewCmdQuarantineReject(f, nil), "", []string{"--tenant", "t", "--reason", "x", "--yes", "--batch", "5000"}},
		{"accept bulk without rule", quarantinecmd.NewCmdQuarantineAccept(f, nil), "", []string{"--tenant", "t", "--max", "5", "--reason", "x"}},
		{"accept rule without placeholder", quarantinecmd.NewCmdQuarantineAccept(f, nil), "", []string{"--tenant", "t", "--rule", "rev2", "--max", "5", "--reason", "x"}},
		{"accept bulk without max", quarantinecmd.NewCmdQuarantineAccept(f, nil), "", []string{"--tenant", "t", "--rule", "{operation_id}-2", "--reason", "x"}},
		{"accept max over the cap", quarantinecmd.NewCmdQuarantineAccept(f, nil), "", []string{"--tenant", "t", "--rule", "{operation_id}-2", "--max", "20000", "--reason", "x"}},
		{"accept id and rule", quarantinecmd.NewCmdQuarantineAccept(f, nil), "", []string{"42", "--rule", "{operation_id}-2", "--max", "5", "--reason", "x"}},
		{"accept bulk with new id", quarantinecmd.NewCmdQuarantineAccept(f, nil), "", []string{"--tenant", "t", "--rule", "{operation_id}-2", "--max", "5", "--reason", "x", "--new-operation-id", "n"}},
		{"bulk run without --yes", quarantinecmd.NewCmdQuarantineBulkAction(f, "run", nil), "", []string{"3"}},
		{"bulk abort without reason", quarantinecmd.NewCmdQuarantineBulkAction(f, "abort", nil), "", []string{"3"}},
		{"bulk approve bad id", quarantinecmd.NewCmdQuarantineBulkAction(f, "approve", nil), "", []string{"three"}},
		{"audit bad cursor", audit.NewCmdAuditList(f, nil), "", []string{"--after", "x"}},
		{"audit two cursors", audit.NewCmdAuditList(f, nil), "", []string{"--after", "3", "--before", "4"}},
	}
	for _, tc := range bad {
		in.Reset()
		in.WriteString(tc.stdin)
		assert.Equal(t, cmdutil.ExitUsage, execSub(t, tc.cmd, tc.args...), tc.name)
	}
}

// TestQuarantineTriageCommands: groups, a bulk reject of a group with its
// dry run, ids on stdin, totals; nothing is written by a refusal.
func TestQuarantineTriageCommands(t *testing.T) {
	t.Parallel()
	fx := newCLIFixture(t)
	dbtest.SeedConflicts(t, fx.dsn,
		dbtest.ClientBug{Prefix: "m-", Tenants: 3, N: 30, Change: "amount", Source: "mobile"},
		dbtest.ClientBug{Prefix: "w-", Tenants: 2, N: 20, Change: "currency", Source: "web"})

	code, out, _ := runQ(t, fx.dsn, "quarantine", "groups", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code)
	groups := jsonLines(t, out)
	require.Len(t, groups, 2)
	assert.Equal(t, float64(30), groups[0]["count"])
	web := groups[1]["id"].(string)

	code, out, _ = runQ(t, fx.dsn, "quarantine", "list", "--changed", "/currency", "--count", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code)
	totals := jsonLines(t, out)[0]
	assert.Equal(t, float64(20), totals["matching"])
	assert.NotEmpty(t, totals["oldest_open"])
	code, _, errOut := runQ(t, fx.dsn, "quarantine", "list", "--source", "web", "--limit", "5", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, errOut, "20 open quarantine record(s) match")
	assert.Contains(t, errOut, "more records: add --after ")

	code, out, errOut = runQ(t, fx.dsn, "quarantine", "reject", "--group", web, "--reason", "web bug", "--dry-run", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, out, `"open":20`)
	assert.Contains(t, errOut, "dry run: nothing decided")
	assert.Equal(t, 0, fx.count(t, "SELECT count(*) FROM idem.quarantine WHERE status <> 'open'"))

	code, _, errOut = runQ(t, fx.dsn, "quarantine", "reject", "--group", web, "--reason", "web bug", "--yes")
	assert.Equal(t, cmdutil.ExitUsage, code, "--yes without a token decides nothing")
	assert.Contains(t, errOut, "--token")
	token := previewToken(t, fx.dsn, "", "quarantine", "reject", "--group", web, "--reason", "web bug")
	assert.Equal(t, 0, fx.count(t, "SELECT count(*) FROM idem.quarantine WHERE status <> 'open'"), "a preview decides nothing")
	code, out, errOut = runQ(t, fx.dsn, "quarantine", "reject", "--token", token, "--reason", "web bug", "--yes", "--batch", "7", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, out, `"decided":20`)
	assert.Contains(t, errOut, "rejected 7 of 20")
	assert.Contains(t, errOut, "rejected 20 of 20")
	assert.Equal(t, 20, fx.count(t, "SELECT count(*) FROM idem.quarantine WHERE status = 'rejected' AND operation_id LIKE 'w-%'"))
	assert.Equal(t, 20, fx.count(t, "SELECT count(*) FROM idem.audit WHERE action = 'quarantine.reject'"))
	code, out, _ = runQ(t, fx.dsn, "audit", "verify", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, out, `"intact":true`)

	// Ids on stdin: an unknown id refuses the whole run.
	ids := dbtest.Column[string](t, fx.pool, "SELECT id::text FROM idem.quarantine WHERE operation_id LIKE 'm-%' ORDER BY id LIMIT 3")
	code, _, errOut = run(t, fx.dsn, strings.Join(append(ids, "999999"), "\n"), "quarantine", "reject", "-", "--reason", "x")
	assert.Equal(t, cmdutil.ExitNotFound, code)
	assert.Contains(t, errOut, "999999")
	assert.Equal(t, 20, fx.count(t, "SELECT count(*) FROM idem.quarantine WHERE status <> 'open'"))
	code, _, errOut = runQ(t, fx.dsn, "quarantine", "reject", ids[0], "--reason", "x", "--dry-run")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, errOut, "dry run: would reject record "+ids[0])
	assert.Equal(t, 20, fx.count(t, "SELECT count(*) FROM idem.quarantine WHERE status <> 'open'"), "a dry run decides nothing")
	token = previewToken(t, fx.dsn, strings.Join(ids, "\n"), "quarantine", "reject", "-", "--reason", "dupes")
	code, _, errOut = runQ(t, fx.dsn, "quarantine", "reject", "--token", token, "--reason", "dupes", "--yes")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Equal(t, 23, fx.count(t, "SELECT count(*) FROM idem.quarantine WHERE status <> 'open'"))
	// Again: nothing left to decide, exit 0.
	code, _, errOut = run(t, fx.dsn, strings.Join(ids, "\n"), "quarantine", "reject", "-", "--reason", "dupes")
	assert.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, errOut, "nothing to reject")

	// The audit log pages with --after, as the quarantine list does.
	code, _, errOut = runQ(t, fx.dsn, "audit", "list", "--limit", "5", "-o", "json")
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
	dbtest.SeedConflicts(t, fx.dsn, dbtest.ClientBug{Prefix: "g-", N: 9, Change: "amount", Source: "mobile"})
	code, out, _ := runQ(t, fx.dsn, "quarantine", "groups", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code)
	group := jsonLines(t, out)[0]["id"].(string)
	bob := dbtest.As(fx.dsn, dbtest.Operator2)
	token := previewToken(t, fx.dsn, "", "quarantine", "reject", "--group", group, "--reason", "INC-7")
	// Five unrelated records of the same cause arrive after the preview.
	dbtest.SeedConflicts(t, fx.dsn, dbtest.ClientBug{Prefix: "late-", N: 5, Change: "amount", Source: "mobile"})
	require.Equal(t, 14, fx.count(t, "SELECT count(*) FROM idem.quarantine WHERE status = 'open'"))

	refused := func(name, dsn, token string) {
		t.Helper()
		open := fx.count(t, "SELECT count(*) FROM idem.quarantine WHERE status = 'open'")
		code, _, errOut := runQ(t, dsn, "quarantine", "reject", "--token", token, "--reason", "INC-7", "--yes")
		assert.Equal(t, cmdutil.ExitUsage, code, "%s: %s", name, errOut)
		assert.Equal(t, open, fx.count(t, "SELECT count(*) FROM idem.quarantine WHERE status = 'open'"), name)
	}
	refused("unknown", fx.dsn, "pv-00000000000000000000000000000000")
	refused("another person's", bob, token)
	code, out, errOut := runQ(t, fx.dsn, "quarantine", "reject", "--token", token, "--reason", "INC-7", "--yes", "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, out, "Rejected 9 record(s) of the preview")
	assert.Contains(t, out, "5 records joined the group after the preview: not decided")
	assert.Equal(t, 5, fx.count(t, "SELECT count(*) FROM idem.quarantine WHERE status = 'open' AND operation_id LIKE 'late-%'"))
	refused("used", fx.dsn, token)
	expired := previewToken(t, fx.dsn, "", "quarantine", "reject", "--group", group, "--reason", "INC-7")
	dbtest.Admin(t, fx.dsn, "UPDATE idem.bulk_preview SET expires_at = now() - interval '1 second' WHERE token = $1", expired)
	refused("expired", fx.dsn, expired)
}

// TestQuarantineBulkAcceptCommands: a bulk accept-as-new is a plan that runs
// nothing until another person approves it; then each record runs once.
func TestQuarantineBulkAcceptCommands(t *testing.T) {
	t.Parallel()
	fx := newCLIFixture(t)
	dbtest.SeedConflicts(t, fx.dsn, dbtest.ClientBug{Prefix: "r-", N: 6, Change: "amount", Source: "settle"})
	bob := dbtest.As(fx.dsn, dbtest.Operator2)
	postings := fx.count(t, "SELECT count(*) FROM demo.posting")

	code, _, errOut := runQ(t, fx.dsn, "quarantine", "accept-as-new", "--source", "settle", "--rule", "{operation_id}-rev2",
		"--max", "5", "--reason", "revisions")
	assert.Equal(t, cmdutil.ExitInvalid, code, "over the cap")
	assert.Contains(t, errOut, "over --max 5")
	code, out, errOut := runQ(t, fx.dsn, "quarantine", "accept-as-new", "--source", "settle", "--rule", "{operation_id}-rev2",
		"--max", "6", "--reason", "revisions", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	plan := jsonLines(t, out)[0]
	id := fmt.Sprint(plan["id"])
	assert.Equal(t, "planned", plan["state"])
	assert.Equal(t, "alice", plan["planned_person"])
	assert.Equal(t, postings, fx.count(t, "SELECT count(*) FROM demo.posting"), "planning runs nothing")

	code, _, errOut = runQ(t, fx.dsn, "quarantine", "bulk", "run", id, "--yes")
	assert.Equal(t, cmdutil.ExitInvalid, code, "not approved")
	assert.Contains(t, errOut, "only an approved plan runs")
	code, _, errOut = runQ(t, fx.dsn, "quarantine", "bulk", "approve", id, "--operator", "not-alice", "--yes")
	assert.Equal(t, cmdutil.ExitInvalid, code, "the planner cannot approve, whatever the label")
	assert.Contains(t, errOut, "four-eyes")
	code, _, errOut = runQ(t, bob, "quarantine", "bulk", "approve", id)
	assert.Equal(t, cmdutil.ExitUsage, code, "no terminal to ask on, no --yes")
	assert.Contains(t, errOut, "--yes (-y)")
	code, _, errOut = runQ(t, bob, "quarantine", "bulk", "approve", "999999", "--yes")
	assert.Equal(t, cmdutil.ExitNotFound, code, errOut)
	code, _, errOut = runQ(t, bob, "quarantine", "bulk", "approve", id, "--yes")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	code, out, errOut = runQ(t, fx.dsn, "quarantine", "bulk", "run", id, "--yes", "--batch", "4", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, out, `"decided":6`)
	assert.Equal(t, postings+6, fx.count(t, "SELECT count(*) FROM demo.posting"), "each payload ran once")
	assert.Equal(t, 6, fx.count(t, "SELECT count(*) FROM idem.inbox WHERE operation_id LIKE 'r-%-rev2'"))
	assert.Equal(t, 6, fx.count(t, `SELECT count(*) FROM idem.audit WHERE action = 'quarantine.accept_as_new'
		AND details::jsonb ->> 'approved_person' = 'bob'`))
	code, out, _ = runQ(t, fx.dsn, "quarantine", "bulk", "show", id, "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, out, `"state":"done"`)
	code, _, _ = runQ(t, fx.dsn, "quarantine", "bulk", "run", id, "--yes")
	assert.Equal(t, cmdutil.ExitInvalid, code, "a done plan runs nothing again")
	assert.Equal(t, postings+6, fx.count(t, "SELECT count(*) FROM demo.posting"))
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
