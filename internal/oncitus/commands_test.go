package oncitus_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/audit"
	"github.com/idemctl/idemctl/demo"
	"github.com/idemctl/idemctl/governance"
	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/lab"
	"github.com/idemctl/idemctl/quarantine"
	"github.com/idemctl/idemctl/recovery"
	"github.com/idemctl/idemctl/tui"
)

// TestInspectOnTheCoordinator: what `idemctl inspect` (and --history) reads
// about an identity whose rows are on a worker, as an operator on the
// coordinator: the record with its saved response and its conflict, and
// the story in time order.
func TestInspectOnTheCoordinator(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	app := e.conn(t, loginApp)
	op := e.pool(t, loginOperator, 2)
	for _, tenant := range e.spread(t, e.superuser(t), "inspect", 1) {
		id := idem.Identity{TenantID: tenant, OperationID: "op"}
		first, err := idem.Execute(ctx, app, transfer(tenant, "op", 10))
		require.NoError(t, err)
		conflict, err := idem.Execute(ctx, app, transfer(tenant, "op", 11))
		require.NoError(t, err)
		require.Equal(t, idem.Conflict, conflict.Outcome)

		rec, err := recovery.ReadInboxRecord(ctx, op, id)
		require.NoError(t, err, tenant)
		assert.Equal(t, demo.Class, rec.Class)
		assert.JSONEq(t, string(first.Response), string(rec.Response))
		assert.Equal(t, []int64{conflict.QuarantineID}, rec.Conflicts)

		events, err := recovery.History(ctx, op, id)
		require.NoError(t, err, tenant)
		var kinds []string
		for _, ev := range events {
			kinds = append(kinds, ev.Event)
		}
		assert.Contains(t, kinds, "applied", "%v", kinds)
		assert.Contains(t, kinds, "conflict", "%v", kinds)

		_, err = recovery.ReadInboxRecord(ctx, op, idem.Identity{TenantID: tenant, OperationID: "never"})
		assert.ErrorIs(t, err, recovery.ErrNoRecord)
	}
}

// TestHorizonCheckOnTheCoordinator: `idemctl horizon check` probes the
// sources and judges them on the coordinator; with only the manual source,
// the horizon is unbounded and not proven.
func TestHorizonCheckOnTheCoordinator(t *testing.T) {
	e := setup(t)
	before := time.Now().Add(-time.Hour)
	rep, err := horizon.Check(context.Background(), e.pool(t, loginOperator, 2), horizon.CheckOptions{Class: demo.Class, Before: &before})
	require.NoError(t, err)
	assert.Equal(t, demo.Class, rep.Class)
	assert.True(t, rep.Unbounded, "only the manual source")
	assert.False(t, rep.Proven)
}

// TestLabAtomicOnTheCoordinator: `idemctl lab --designs atomic` on the
// coordinator, with real worker processes killed mid-trial: nothing lost,
// doubled or answered wrongly, and no scratch schema left behind.
func TestLabAtomicOnTheCoordinator(t *testing.T) {
	e := setup(t)
	bin := filepath.Join(t.TempDir(), "idemctl")
	build := exec.Command("go", "build", "-o", bin, "github.com/idemctl/idemctl/cmd/idemctl")
	build.Env = append(os.Environ(), "GOFLAGS=")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	rep, err := lab.Run(context.Background(), lab.Options{DSN: e.admin, Trials: 40, Seed: 7, Designs: []string{"atomic"},
		Parallel: 4, Worker: lab.WorkerCommand{Path: bin, Args: []string{"lab", "worker"}}})
	require.NoError(t, err)
	require.Len(t, rep.Designs, 1)
	d := rep.Designs[0]
	assert.Positive(t, d.Operations)
	assert.Zero(t, d.Lost, "%+v", d)
	assert.Zero(t, d.Doubled, "%+v", d)
	assert.Zero(t, d.WrongResponse, "%+v", d)
	assert.Zero(t, d.MissedConflicts, "%+v", d)
	assert.Zero(t, count(t, e.superuser(t), `SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'idemlab\_%'`), "scratch schemas dropped")
}

// TestTUIServicesOnTheCoordinator: every read and decision the TUI's views
// make, through the same services it builds over a pool, as an operator on
// the coordinator: the queue (a page, its total, groups, a bulk preview and
// a group reject), the audit view (list, verify), the horizon view (sources,
// plans) and the resolve stepper (primary check, lookup, execute).
func TestTUIServicesOnTheCoordinator(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	app := e.conn(t, loginApp)
	svc := tui.PoolServices(e.pool(t, loginOperator, 4))
	tenants := e.spread(t, e.superuser(t), "tui", 2)
	conflictIn(t, app, tenants, 12)
	f := quarantine.Filter{Status: quarantine.StatusOpen, OpPrefix: "op"}
	page, err := svc.Quarantine.List(ctx, f)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, len(page.Items), len(tenants))
	totals, err := svc.Quarantine.Count(ctx, f)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, totals.Matching, int64(len(tenants)))
	groups, err := svc.Quarantine.Groups(ctx, quarantine.GroupOptions{Filter: quarantine.Filter{Tenant: tenants[0]}})
	require.NoError(t, err)
	require.Len(t, groups, 1)
	sel := quarantine.Selection{Filter: quarantine.Filter{Status: quarantine.StatusOpen, Group: &groups[0].GroupKey, Tenant: tenants[0]}}
	preview, err := svc.Quarantine.PreviewBulk(ctx, sel)
	require.NoError(t, err)
	assert.EqualValues(t, 1, preview.Open)
	res, err := svc.Quarantine.RejectBulk(ctx, sel, quarantine.BulkOptions{Operator: "on-call", Reason: "one client bug", MaxID: preview.MaxID})
	require.NoError(t, err)
	assert.EqualValues(t, 1, res.Decided)

	recs, err := svc.Audit.List(ctx, audit.Filter{Limit: 5})
	require.NoError(t, err)
	assert.NotEmpty(t, recs)
	rep, err := svc.Audit.Verify(ctx)
	require.NoError(t, err)
	assert.NoError(t, rep.Err())

	_, err = svc.Horizon.Sources(ctx)
	require.NoError(t, err)
	_, err = svc.Horizon.Plans(ctx)
	require.NoError(t, err)

	_, err = svc.Resolve.CheckPrimary(ctx)
	require.NoError(t, err)
	p, err := idem.Prepare(transfer(tenants[1], "tui-new", 5), idem.PayloadLimits{})
	require.NoError(t, err)
	st, err := svc.Resolve.Lookup(ctx, p, "on-call", false)
	require.NoError(t, err)
	assert.False(t, st.Found)
	out, err := svc.Resolve.Execute(ctx, p, "on-call")
	require.NoError(t, err)
	assert.Equal(t, recovery.Applied, out.Outcome)
}

// TestBulkAcceptOnTheCoordinator: a bulk accept-as-new planned by one
// operator, approved by another person and run, on records whose tenants
// are on both workers: each payload runs once, as its new operation.
func TestBulkAcceptOnTheCoordinator(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	app := e.conn(t, loginApp)
	alice, bob := e.pool(t, loginOperator, 2), e.pool(t, loginOperator2, 2)
	tenants := e.spread(t, e.superuser(t), "bulkacc", 1)
	conflictIn(t, app, tenants, 13)
	var ids []int64
	for _, tenant := range tenants {
		page, err := quarantine.List(ctx, alice, quarantine.Filter{Status: quarantine.StatusOpen, Tenant: tenant})
		require.NoError(t, err)
		require.Len(t, page.Items, 1)
		ids = append(ids, page.Items[0].ID)
	}
	plan, err := quarantine.PlanAccept(ctx, alice, quarantine.Selection{IDs: ids}, 0, "{operation_id}-rev2", 10, "alice", "revisions")
	require.NoError(t, err)
	_, err = quarantine.ApproveAccept(ctx, bob, plan.ID, "bob")
	require.NoError(t, err)
	res, err := quarantine.RunAccept(ctx, alice, plan.ID, "alice", 10, nil)
	require.NoError(t, err)
	assert.EqualValues(t, len(tenants), res.Decided)
	for _, tenant := range tenants {
		assert.EqualValues(t, 1, count(t, e.superuser(t), "SELECT count(*) FROM demo.posting WHERE tenant_id = $1 AND operation_id = 'op-rev2'", tenant))
	}
}

// conflictIn applies operation "op" (amount 10) for each tenant and retries
// it with another amount: one open quarantine record each.
func conflictIn(t *testing.T, app *pgx.Conn, tenants []string, amount int) {
	t.Helper()
	for _, tenant := range tenants {
		_, err := idem.Execute(context.Background(), app, transfer(tenant, "op", 10))
		require.NoError(t, err)
		res, err := idem.Execute(context.Background(), app, transfer(tenant, "op", amount))
		require.NoError(t, err)
		require.Equal(t, idem.Conflict, res.Outcome)
	}
}

// TestLoweringAMinAgeOnTheCoordinator: a class's min-age (op_class, a
// reference table) is raised by one person at once; lowering it is a
// governed change that another person's approval applies on every node.
func TestLoweringAMinAgeOnTheCoordinator(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	alice, bob := e.pool(t, loginOperator, 1), e.pool(t, loginOperator2, 1)
	month, day := 30*24*time.Hour, 24*time.Hour
	pol, change, err := horizon.SetClass(ctx, alice, demo.Class, horizon.Forever, &month, "alice", "")
	require.NoError(t, err)
	assert.Zero(t, change)
	assert.Equal(t, month, pol.MinAge)
	pol, change, err = horizon.SetClass(ctx, alice, demo.Class, horizon.Forever, &day, "alice", "the ledger is rebuilt daily (CHG-9)")
	require.NoError(t, err)
	require.NotZero(t, change)
	assert.Equal(t, month, pol.MinAge, "planned, not applied")
	c, err := governance.ApproveChange(ctx, bob, change, "bob")
	require.NoError(t, err)
	assert.Equal(t, governance.KindClassMinAge, c.Kind)
	pol, err = horizon.GetClass(ctx, alice, demo.Class)
	require.NoError(t, err)
	assert.Equal(t, day, pol.MinAge)
}
