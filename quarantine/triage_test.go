package quarantine_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/audit"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/db"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/quarantine"
)

// The three client bugs of an incident: a mobile client that changed amounts,
// a web client that changed currencies, a consumer that changed the payee and
// the amount.
var (
	bugMobile = dbtest.ClientBug{Prefix: "m-", Tenants: 5, N: 500, Change: "amount", Source: "mobile"}
	bugWeb    = dbtest.ClientBug{Prefix: "w-", Tenants: 3, N: 300, Change: "currency", Source: "web"}
	bugKafka  = dbtest.ClientBug{Prefix: "k-", Tenants: 2, N: 200, Change: "amount+to", Source: "kafka"}
)

func scaled(b dbtest.ClientBug, n int) dbtest.ClientBug { b.N = n; return b }

// groupOf finds the group with these fields among groups.
func groupOf(t *testing.T, groups []quarantine.Group, fields ...string) quarantine.Group {
	t.Helper()
	for _, g := range groups {
		if strings.Join(g.Fields, " ") == strings.Join(fields, " ") {
			return g
		}
	}
	t.Fatalf("no group with fields %v in %+v", fields, groups)
	return quarantine.Group{}
}

// TestTriageIncident: 1,000 open records from three client bugs make exactly
// three groups; a bulk reject of one group decides exactly its records, each
// with its own audit row, in six batches; the chain stays intact; a replay of
// a rejected record stays blocked and runs nothing. (10,000 records made the
// same assertions with ten times the numbers and took 37 s of seeding; the
// triage benchmarks time these queries on 1,000,000.)
func TestTriageIncident(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)
	dbtest.SeedConflicts(t, b.dsn, bugMobile, bugWeb, bugKafka)

	groups, err := quarantine.Groups(b.ctx, b.pool, quarantine.GroupOptions{})
	require.NoError(t, err)
	require.Len(t, groups, 3)
	mobile, web, kafka := groupOf(t, groups, "/amount"), groupOf(t, groups, "/currency"), groupOf(t, groups, "/amount", "/to")
	assert.Equal(t, []int64{500, 300, 200}, []int64{mobile.Count, web.Count, kafka.Count}, "largest first, exact counts")
	assert.Equal(t, "demo.transfer", web.Class)
	assert.True(t, strings.HasPrefix(web.Example.OperationID, "w-"), web.Example.OperationID)
	assert.Regexp(t, `^g-[0-9a-f]{12}$`, web.ID)

	bySource, err := quarantine.Groups(b.ctx, b.pool, quarantine.GroupOptions{By: quarantine.GroupBy{Source: true}})
	require.NoError(t, err)
	require.Len(t, bySource, 3, "one source per bug")
	require.NotNil(t, bySource[1].Source)
	assert.Equal(t, "web", *bySource[1].Source)
	byTenant, err := quarantine.Groups(b.ctx, b.pool, quarantine.GroupOptions{By: quarantine.GroupBy{Tenant: true}, Limit: 100})
	require.NoError(t, err)
	assert.Len(t, byTenant, 5+3+2)

	before := b.snapshot(t)
	f, g, err := quarantine.ResolveGroup(b.ctx, b.pool, web.ID, quarantine.Filter{})
	require.NoError(t, err)
	assert.Equal(t, web.Count, g.Count)
	preview, err := quarantine.PreviewBulk(b.ctx, b.pool, quarantine.Selection{Filter: f})
	require.NoError(t, err)
	assert.Equal(t, int64(300), preview.Open)
	assert.Len(t, preview.Sample, quarantine.SampleSize)
	assert.Equal(t, before, b.snapshot(t), "a preview writes nothing")

	var progress []int64
	res, err := quarantine.RejectBulk(b.ctx, b.pool, quarantine.Selection{Filter: f}, quarantine.BulkOptions{
		Operator: "alice", Reason: "web client currency bug, INC-881", MaxID: preview.MaxID, Batch: 50,
		Progress: func(r quarantine.BulkResult) { progress = append(progress, r.Decided) }})
	require.NoError(t, err)
	assert.Equal(t, int64(300), res.Decided)
	assert.Zero(t, res.Skipped)
	assert.Equal(t, 6, res.Batches)
	assert.Equal(t, []int64{50, 100, 150, 200, 250, 300}, progress)

	assert.Equal(t, 300, b.count(t, "SELECT count(*) FROM idem.quarantine WHERE status = 'rejected'"))
	assert.Equal(t, 300, b.count(t, "SELECT count(*) FROM idem.quarantine WHERE status = 'rejected' AND operation_id LIKE 'w-%'"))
	assert.Equal(t, 700, b.count(t, "SELECT count(*) FROM idem.quarantine WHERE status = 'open'"))
	// Each record has its own audit row, naming it, carrying the run; and
	// the decision points at it.
	assert.Equal(t, 300, b.count(t, `SELECT count(DISTINCT a.target) FROM idem.audit a
		WHERE a.action = 'quarantine.reject' AND a.details::jsonb ->> 'bulk_run' = $1`, res.Run))
	assert.Equal(t, 300, b.count(t, `SELECT count(*) FROM idem.quarantine q JOIN idem.audit a ON a.id = q.decision_audit_id
		WHERE q.status = 'rejected' AND a.target = 'quarantine:' || q.id AND a.person = 'alice'
		  AND a.details::jsonb ->> 'reason' = 'web client currency bug, INC-881'`))
	assert.Equal(t, before.Audit+300, b.snapshot(t).Audit)
	report, err := audit.Verify(b.ctx, b.pool)
	require.NoError(t, err)
	assert.True(t, report.Intact, report.Problem)

	groups, err = quarantine.Groups(b.ctx, b.pool, quarantine.GroupOptions{})
	require.NoError(t, err)
	assert.Len(t, groups, 2, "the rejected group is gone from the open groups")
	_, _, err = quarantine.ResolveGroup(b.ctx, b.pool, web.ID, quarantine.Filter{})
	assert.ErrorIs(t, err, quarantine.ErrNotFound)

	// A conflicting replay of a rejected record stays blocked.
	postings := b.count(t, "SELECT count(*) FROM demo.posting")
	replay := b.exec(t, cmd("tenant-1", "w-00001", "demo.transfer", `{"amount":1,"currency":"USD","from":"alice","to":"bob"}`))
	assert.Equal(t, idem.Conflict, replay.Outcome)
	assert.Equal(t, postings, b.count(t, "SELECT count(*) FROM demo.posting"), "nothing ran")
	rec, err := quarantine.Show(b.ctx, b.pool, replay.QuarantineID)
	require.NoError(t, err)
	assert.Equal(t, quarantine.StatusRejected, rec.Status)
	assert.Equal(t, int64(2), rec.Occurrences)
}

// fixtureFilters seeds small bugs for the filter tests.
func seedSmall(t *testing.T, b bundle) {
	t.Helper()
	dbtest.SeedConflicts(t, b.dsn, scaled(bugMobile, 40), scaled(bugWeb, 30), scaled(bugKafka, 20),
		dbtest.ClientBug{Prefix: "x_%", N: 3, Change: "amount", Source: "mobile"})
}

func ids(t *testing.T, b bundle, f quarantine.Filter) []string {
	t.Helper()
	var out []string
	for {
		p, err := quarantine.List(b.ctx, b.pool, f)
		require.NoError(t, err)
		for _, s := range p.Items {
			out = append(out, s.OperationID)
		}
		if p.Next == nil {
			return out
		}
		f.After = p.Next
	}
}

func TestListFiltersOnTheServer(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	seedSmall(t, b)
	auditor := dbtest.PoolAs(t, b.dsn, dbtest.Auditor, 2)
	tests := []struct {
		name   string
		filter quarantine.Filter
		want   int
		each   func(op string) bool
	}{
		{"all open", quarantine.Filter{}, 93, nil},
		{"tenant", quarantine.Filter{Tenant: "tenant-2"}, 8 + 10, nil},
		{"op exact", quarantine.Filter{Op: "w-00007"}, 1, func(op string) bool { return op == "w-00007" }},
		{"op prefix", quarantine.Filter{OpPrefix: "m-0001"}, 10, func(op string) bool { return strings.HasPrefix(op, "m-0001") }},
		{"op prefix is literal, not a pattern", quarantine.Filter{OpPrefix: "x_%"}, 3, func(op string) bool { return strings.HasPrefix(op, "x_%") }},
		{"op prefix matching nothing", quarantine.Filter{OpPrefix: "m_"}, 0, nil},
		{"class", quarantine.Filter{Class: "demo.transfer"}, 93, nil},
		{"unknown class", quarantine.Filter{Class: "payments.charge"}, 0, nil},
		{"changed amount", quarantine.Filter{Changed: "/amount"}, 40 + 20 + 3, nil},
		{"changed to", quarantine.Filter{Changed: "/to"}, 20, func(op string) bool { return strings.HasPrefix(op, "k-") }},
		{"changed to and tenant", quarantine.Filter{Changed: "/to", Tenant: "tenant-0"}, 10, nil},
		{"source", quarantine.Filter{Source: "web"}, 30, func(op string) bool { return strings.HasPrefix(op, "w-") }},
		{"since", quarantine.Filter{Since: time.Now().Add(-time.Hour)}, 93, nil},
		{"until", quarantine.Filter{Until: time.Now().Add(-time.Hour)}, 0, nil},
		{"rejected", quarantine.Filter{Status: quarantine.StatusRejected}, 0, nil},
		{"every page of 7", quarantine.Filter{Limit: 7}, 93, nil},
	}
	for _, tc := range tests {
		got := ids(t, b, tc.filter)
		assert.Len(t, got, tc.want, tc.name)
		seen := map[string]bool{}
		for _, op := range got {
			assert.False(t, seen[op], "%s: %s twice across pages", tc.name, op)
			seen[op] = true
			if tc.each != nil {
				assert.True(t, tc.each(op), "%s: %s", tc.name, op)
			}
		}
		totals, err := quarantine.Count(b.ctx, auditor, tc.filter)
		require.NoError(t, err, tc.name)
		assert.Equal(t, int64(tc.want), totals.Matching, tc.name)
		assert.Equal(t, tc.want > 0, totals.OldestOpen != nil, tc.name)
	}
	// An auditor reads the same pages as an operator.
	p, err := quarantine.List(b.ctx, auditor, quarantine.Filter{Changed: "/currency", Limit: 100})
	require.NoError(t, err)
	assert.Len(t, p.Items, 30)
}

func TestBadFiltersAreRefusedBeforeAnythingIsSent(t *testing.T) {
	t.Parallel()
	for name, f := range map[string]quarantine.Filter{
		"status":               {Status: "closed"},
		"limit":                {Limit: quarantine.MaxLimit + 1},
		"op and prefix":        {Op: "a", OpPrefix: "b"},
		"op control char":      {Op: "a\x01"},
		"prefix too long":      {OpPrefix: strings.Repeat("x", 300)},
		"pointer without /":    {Changed: "amount"},
		"pointer bad escape":   {Changed: "/a~2"},
		"pointer trailing ~":   {Changed: "/a~"},
		"tenant control char":  {Tenant: "t\n"},
		"since after until":    {Since: time.Now(), Until: time.Now().Add(-time.Hour)},
		"since equal to until": {Since: time.Unix(5, 0), Until: time.Unix(5, 0)},
	} {
		// A nil database: anything sent would panic.
		_, err := quarantine.List(context.Background(), nil, f)
		assert.ErrorIs(t, err, quarantine.ErrInvalidFilter, name)
		_, err = quarantine.Count(context.Background(), nil, f)
		assert.ErrorIs(t, err, quarantine.ErrInvalidFilter, name)
	}
	_, err := quarantine.ParseCursor("12:x")
	assert.ErrorIs(t, err, quarantine.ErrInvalidFilter)
	_, err = quarantine.PreviewBulk(context.Background(), nil, quarantine.Selection{Filter: quarantine.Filter{Status: quarantine.StatusAll}})
	assert.ErrorIs(t, err, quarantine.ErrInvalidFilter, "a bulk decision over everything is refused")
	_, err = quarantine.PreviewBulk(context.Background(), nil, quarantine.Selection{IDs: []int64{}})
	assert.ErrorIs(t, err, quarantine.ErrInvalidFilter, "no ids")
	_, _, err = quarantine.ResolveGroup(context.Background(), nil, "g-12", quarantine.Filter{})
	assert.ErrorIs(t, err, quarantine.ErrInvalidFilter)
}

// TestBulkRejectByIDs: ids on stdin; an unknown id refuses the whole run
// before anything is written; already decided ids are skipped, not decided twice.
func TestBulkRejectByIDs(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	seedSmall(t, b)
	w := dbtest.Column[int64](t, b.pool, "SELECT id FROM idem.quarantine WHERE operation_id LIKE 'w-%' ORDER BY id LIMIT 12")
	require.Len(t, w, 12)

	before := b.snapshot(t)
	_, err := quarantine.PreviewBulk(b.ctx, b.pool, quarantine.Selection{IDs: append([]int64{999999}, w...)})
	assert.ErrorIs(t, err, quarantine.ErrNotFound)
	assert.Contains(t, err.Error(), "999999")
	assert.Equal(t, before, b.snapshot(t))

	_, err = quarantine.Reject(b.ctx, b.pool, w[0], "bob", "decided earlier")
	require.NoError(t, err)
	sel := quarantine.Selection{IDs: append(w, w[3], w[3])} // duplicates count once
	p, err := quarantine.PreviewBulk(b.ctx, b.pool, sel)
	require.NoError(t, err)
	assert.Equal(t, int64(11), p.Open)
	assert.Equal(t, int64(1), p.Decided)
	res, err := quarantine.RejectBulk(b.ctx, b.pool, sel, quarantine.BulkOptions{Operator: "alice", Reason: "INC-881", Batch: 5})
	require.NoError(t, err)
	assert.Equal(t, int64(11), res.Decided)
	assert.Equal(t, int64(1), res.Skipped)
	assert.Equal(t, 3, res.Batches)
	rec, err := quarantine.Show(b.ctx, b.pool, w[0])
	require.NoError(t, err)
	assert.Equal(t, "bob", rec.Decision.By, "the earlier decision stands")
	assert.Equal(t, before.Audit+12, b.snapshot(t).Audit)

	_, err = quarantine.PreviewBulk(b.ctx, b.pool, sel)
	assert.ErrorIs(t, err, quarantine.ErrNothingToDecide)
	_, err = quarantine.RejectBulk(b.ctx, b.pool, sel, quarantine.BulkOptions{Operator: "alice", Reason: ""})
	assert.ErrorIs(t, err, quarantine.ErrDecisionInput)
}

// TestBulkRejectStopsAtThePreview: a record arriving after the preview is not
// decided by the run the preview announced.
func TestBulkRejectStopsAtThePreview(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	dbtest.SeedConflicts(t, b.dsn, scaled(bugMobile, 10))
	f := quarantine.Filter{Changed: "/amount"}
	p, err := quarantine.PreviewBulk(b.ctx, b.pool, quarantine.Selection{Filter: f})
	require.NoError(t, err)
	require.Equal(t, int64(10), p.Open)
	dbtest.SeedConflicts(t, b.dsn, dbtest.ClientBug{Prefix: "late-", N: 2, Change: "amount", Source: "mobile"})
	res, err := quarantine.RejectBulk(b.ctx, b.pool, quarantine.Selection{Filter: f},
		quarantine.BulkOptions{Operator: "alice", Reason: "INC-881", MaxID: p.MaxID})
	require.NoError(t, err)
	assert.Equal(t, int64(10), res.Decided)
	assert.Equal(t, 2, b.count(t, "SELECT count(*) FROM idem.quarantine WHERE status = 'open' AND operation_id LIKE 'late-%'"))
}

// TestBulkRejectSurvivesSIGKILL: a bulk reject killed halfway, then run
// again, decides every record exactly once, each with one audit row.
func TestBulkRejectSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	dbtest.SeedConflicts(t, b.dsn, scaled(bugWeb, 600))
	child := exec.Command(os.Args[0], "-test.run=^TestBulkRejectChild$", "-test.v")
	child.Env = append(os.Environ(), "IDEMCTL_BULK_CHILD_DSN="+b.dsn)
	out, err := child.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, child.Start())
	sc := bufio.NewScanner(out)
	batches := 0
	for sc.Scan() && batches < 5 {
		if strings.HasPrefix(sc.Text(), "batch ") {
			batches++
		}
	}
	require.Equal(t, 5, batches, "the child committed five batches")
	require.NoError(t, child.Process.Kill()) // SIGKILL, mid-batch or between batches
	_ = child.Wait()

	decided := b.count(t, "SELECT count(*) FROM idem.quarantine WHERE status = 'rejected'")
	assert.GreaterOrEqual(t, decided, 250)
	assert.Less(t, decided, 600, "killed halfway")
	res, err := quarantine.RejectBulk(b.ctx, b.pool, quarantine.Selection{Filter: quarantine.Filter{Source: "web"}},
		quarantine.BulkOptions{Operator: "alice", Reason: "INC-881", Batch: 50})
	require.NoError(t, err)
	assert.Equal(t, int64(600-decided), res.Decided, "the rerun decides what is left")
	assert.Equal(t, 600, b.count(t, "SELECT count(*) FROM idem.quarantine WHERE status = 'rejected'"))
	assert.Equal(t, 600, b.count(t, "SELECT count(*) FROM idem.audit WHERE action = 'quarantine.reject'"), "one audit row each")
	assert.Equal(t, 600, b.count(t, "SELECT count(DISTINCT target) FROM idem.audit WHERE action = 'quarantine.reject'"))
	report, err := audit.Verify(b.ctx, b.pool)
	require.NoError(t, err)
	assert.True(t, report.Intact, report.Problem)
}

// TestBulkRejectChild is TestBulkRejectSurvivesSIGKILL's child process: it
// rejects in batches of 50, printing a line after each, slowly enough to be
// killed halfway. Without its environment it checks nothing and passes.
func TestBulkRejectChild(t *testing.T) {
	dsn := os.Getenv("IDEMCTL_BULK_CHILD_DSN")
	if dsn == "" {
		return
	}
	ctx := context.Background()
	pool, err := db.Open(ctx, dsn, db.Options{MaxConns: 2})
	require.NoError(t, err)
	defer pool.Close()
	_, err = quarantine.RejectBulk(ctx, pool, quarantine.Selection{Filter: quarantine.Filter{Source: "web"}},
		quarantine.BulkOptions{Operator: "alice", Reason: "INC-881", Batch: 50, Progress: func(r quarantine.BulkResult) {
			fmt.Printf("batch %d %d\n", r.Batches, r.Decided)
			time.Sleep(300 * time.Millisecond)
		}})
	require.NoError(t, err)
}
