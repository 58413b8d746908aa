package horizon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/audit"
	"github.com/idemctl/idemctl/governance"
	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/quarantine"
)

const projClass = "proj.view"

// sourcePasswordEnv names the variable that holds the password of the login
// postgres sources probe with (TestMain sets it): a source's DSN never
// carries a password, it names where the password is.
const sourcePasswordEnv = dbtest.SourcePasswordEnv

// TestMain sets the sources' password variable once for the whole package,
// so that the tests that probe postgres sources stay parallel.
func TestMain(m *testing.M) {
	dbtest.SetSourcePassword()
	os.Exit(m.Run())
}

// fixture is a fresh database seen through the roles its users have: pool is
// the operator alice (plans, corrections, sources), bob the second operator
// (approves), app a service's login (runs operations).
type fixture struct {
	t    *testing.T
	ctx  context.Context
	pool *pgxpool.Pool
	bob  *pgxpool.Pool
	app  *pgxpool.Pool
	dsn  string
}

// setup gives a fresh database with a horizon class proj.view (effect in Go,
// registered by the schema owner) and daily partitions for the last 20 days
// (made by the operator, as idemctl horizon maintain does).
func setup(t *testing.T) *fixture {
	t.Helper()
	pool, dsn := dbtest.NewPool(t, 8)
	f := &fixture{t: t, ctx: context.Background(), pool: pool, dsn: dsn,
		bob: dbtest.PoolAs(t, dsn, dbtest.Operator2, 4),
		app: dbtest.PoolAs(t, dsn, dbtest.App, 8)}
	dbtest.RegisterAppClass(t, dsn, projClass, "horizon")
	f.exec("SELECT idem.inbox_body_ensure(current_date - 20, current_date)")
	return f
}

// removeSource removes a replay source: alice plans it, bob approves.
func (f *fixture) removeSource(name string) {
	f.t.Helper()
	c, err := horizon.RemoveSource(f.ctx, f.pool, name, "alice", "retired")
	require.NoError(f.t, err)
	_, err = governance.ApproveChange(f.ctx, f.bob, c.ID, "bob")
	require.NoError(f.t, err)
}

// exec runs sql as the operator alice.
func (f *fixture) exec(sql string, args ...any) {
	f.t.Helper()
	_, err := f.pool.Exec(f.ctx, sql, args...)
	require.NoError(f.t, err, sql)
}

// count reads a count as the operator alice.
func (f *fixture) count(sql string, args ...any) int64 {
	f.t.Helper()
	var n int64
	require.NoError(f.t, f.pool.QueryRow(f.ctx, sql, args...).Scan(&n), sql)
	return n
}

// seed writes n applied identities tenant/prefixN of class, payload {"n":N},
// created from age ago on, one every spacing (backdated history, written by
// the schema owner: dbtest.Seed).
func (f *fixture) seed(class, tenant, prefix string, n int, age, spacing time.Duration) {
	f.t.Helper()
	dbtest.Seed(f.t, f.dsn, class, tenant, prefix, n, age, spacing)
}

// seedUnpartitioned is seed for days that have no partition of their own, and
// creates none: the bodies land in the default partition, as they do when
// `idemctl horizon maintain` was not scheduled.
func (f *fixture) seedUnpartitioned(class, tenant, prefix string, n int, age, spacing time.Duration) {
	f.t.Helper()
	dbtest.SeedUnpartitioned(f.t, f.dsn, class, tenant, prefix, n, age, spacing)
}

// businessTable creates, as the superuser, a table of the service's own (an
// outbox, a DLQ) and lets the login postgres sources probe with read it.
func (f *fixture) businessTable(name, columns string) {
	f.t.Helper()
	dbtest.Admin(f.t, f.dsn, fmt.Sprintf("CREATE TABLE public.%s (%s); GRANT SELECT ON public.%s TO %s",
		name, columns, name, pgx.Identifier{string(dbtest.Nobody)}.Sanitize()))
}

// sourceDSN is this database's URL for the login that postgres sources probe
// with (dbtest.Nobody: no right on schema idem, SELECT on the business
// tables), without its password: the source names sourcePasswordEnv instead.
func (f *fixture) sourceDSN() string { return dbtest.SourceDSN(f.dsn) }

// pgSource is a postgres source on this database running query.
func (f *fixture) pgSource(name, query string) horizon.Source {
	return horizon.Source{Name: name, Kind: horizon.KindPostgres,
		Config: horizon.SourceConfig{DSN: f.sourceDSN(), PasswordEnv: sourcePasswordEnv, Query: query}}
}

func (f *fixture) primaryNow() time.Time {
	var now time.Time
	require.NoError(f.t, f.pool.QueryRow(f.ctx, "SELECT now()").Scan(&now))
	return now
}

func (f *fixture) addSource(s horizon.Source) {
	f.t.Helper()
	require.NoError(f.t, horizon.AddSource(f.ctx, f.pool, s, "alice"))
}

// replay runs the identity again as the service would (the app login),
// through the executor with a Go effect, and reports the outcome and whether
// the effect ran.
func (f *fixture) replay(tenant, op string, payload string) (idem.Result, bool, error) {
	ran := false
	res, err := idem.ExecuteFunc(f.ctx, f.app, idem.Command{
		Identity: idem.Identity{TenantID: tenant, OperationID: op}, Class: projClass, Payload: []byte(payload),
	}, func(ctx context.Context, tx pgx.Tx) (json.RawMessage, error) {
		ran = true
		return json.RawMessage(`{"ran":true}`), nil
	})
	return res, ran, err
}

// planApproved plans a purge of projClass before `before` as alice and has
// bob approve it.
func (f *fixture) planApproved(before time.Time) horizon.Plan {
	f.t.Helper()
	p, err := horizon.MakePlan(f.ctx, f.pool, horizon.PlanOptions{Class: projClass, Before: before, Operator: "alice", AcceptUnbounded: true})
	require.NoError(f.t, err)
	p, err = horizon.Approve(f.ctx, f.bob, p.ID, "bob")
	require.NoError(f.t, err)
	return p
}

func evidenceOf(t *testing.T, rep horizon.CheckReport, name string) horizon.Evidence {
	t.Helper()
	for _, ev := range rep.Evidence {
		if ev.Source == name {
			return ev
		}
	}
	t.Fatalf("no evidence for source %s in %+v", name, rep.Evidence)
	return horizon.Evidence{}
}

func TestPostgresSource(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.seed(projClass, "t1", "op-", 10, 10*24*time.Hour, time.Minute)
	f.businessTable("dlq", "tenant text, op text, ts timestamptz")
	dbtest.Admin(t, f.dsn, "INSERT INTO public.dlq VALUES ('t1', 'op-3', now() - interval '9 days'), ('t1', 'op-4', now() - interval '9 days')")
	f.addSource(f.pgSource("dlq-bound", "SELECT min(ts) FROM public.dlq"))
	f.addSource(f.pgSource("dlq-enum", "SELECT tenant, op, ts FROM public.dlq"))
	now := f.primaryNow()

	// Before the DLQ's oldest message: the bounding proof holds.
	early := now.Add(-15 * 24 * time.Hour)
	rep, err := horizon.Check(f.ctx, f.pool, horizon.CheckOptions{Class: projClass, Before: &early})
	require.NoError(t, err)
	b := evidenceOf(t, rep, "dlq-bound")
	assert.Equal(t, horizon.Bounding, b.Mode)
	assert.Equal(t, horizon.VerdictClosed, b.Verdict, b.Reason)
	require.NotNil(t, b.Oldest)
	assert.True(t, rep.Proven)
	assert.WithinDuration(t, b.Oldest.Add(-horizon.DefaultMargin), rep.SafeCutoff, time.Millisecond)

	// After it: the bounding source is open (blocks), the enumerating one pins.
	late := now.Add(-time.Hour)
	rep, err = horizon.Check(f.ctx, f.pool, horizon.CheckOptions{Class: projClass, Before: &late})
	require.NoError(t, err)
	assert.Equal(t, horizon.VerdictOpen, evidenceOf(t, rep, "dlq-bound").Verdict)
	e := evidenceOf(t, rep, "dlq-enum")
	assert.Equal(t, horizon.Enumerating, e.Mode)
	assert.Equal(t, horizon.VerdictClosed, e.Verdict)
	assert.EqualValues(t, 2, e.Enumerated)
	assert.EqualValues(t, 2, e.Pinned)
	assert.False(t, rep.Proven)
	assert.Zero(t, f.count("SELECT count(*) FROM idem.horizon_enum"), "probe runs are cleaned up")

	// Failing probes fail closed, with their reason, and never show the
	// password they connected with.
	f.addSource(f.pgSource("broken", "SELECT tenant, op FROM public.dlq"))
	slow := f.pgSource("slow", "SELECT now() FROM pg_sleep(5)")
	slow.Timeout = 300 * time.Millisecond
	f.addSource(slow)
	f.addSource(f.pgSource("future", "SELECT now() + interval '1 day'"))
	f.addSource(horizon.Source{Name: "unreachable", Kind: horizon.KindPostgres, Timeout: 2 * time.Second,
		Config: horizon.SourceConfig{DSN: "postgres://" + string(dbtest.Nobody) + "@127.0.0.1:1/x?connect_timeout=1",
			PasswordEnv: sourcePasswordEnv, Query: "SELECT now()"}})
	nopw := f.pgSource("nopassword", "SELECT now()")
	nopw.Config.PasswordEnv = "IDEMCTL_SOURCE_TEST_NO_SUCH_VARIABLE"
	f.addSource(nopw)
	f.businessTable("hidden", "ts timestamptz")
	dbtest.Admin(t, f.dsn, "REVOKE SELECT ON public.hidden FROM "+pgx.Identifier{string(dbtest.Nobody)}.Sanitize())
	f.addSource(f.pgSource("forbidden", "SELECT min(ts) FROM public.hidden"))
	rep, err = horizon.Check(f.ctx, f.pool, horizon.CheckOptions{Class: projClass, Before: &early})
	require.NoError(t, err)
	for name, want := range map[string]string{"broken": "2 columns", "slow": "timed out", "future": "future",
		"unreachable": "connect", "nopassword": "IDEMCTL_SOURCE_TEST_NO_SUCH_VARIABLE is not set", "forbidden": "permission denied"} {
		ev := evidenceOf(t, rep, name)
		assert.Equal(t, horizon.VerdictFailed, ev.Verdict, name)
		assert.Contains(t, ev.Reason, want, name)
		assert.NotContains(t, ev.Reason, dbtest.TestPassword, name)
	}
	assert.False(t, rep.Proven)
	_, err = horizon.MakePlan(f.ctx, f.pool, horizon.PlanOptions{Class: projClass, Before: early, Operator: "alice", AcceptUnbounded: true})
	var pe *horizon.ProofError
	require.ErrorAs(t, err, &pe)
	assert.ErrorIs(t, err, horizon.ErrNotProven)
	assert.Zero(t, f.count("SELECT count(*) FROM idem.horizon_plan"), "a refused plan records nothing")
	assert.Zero(t, f.count("SELECT count(*) FROM idem.audit WHERE action = 'horizon.plan'"))
}

func TestManualSourceAndCorrections(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.seed(projClass, "t1", "op-", 10, 10*24*time.Hour, time.Minute)
	c, err := horizon.AddCorrection(f.ctx, f.pool, idem.Identity{TenantID: "t1", OperationID: "op-5"}, "refund REF-9 pending", "alice")
	require.NoError(t, err)
	assert.Equal(t, "alice", c.CreatedBy)
	for _, reason := range []string{" ", "fix \x1b]0;pwned\x07"} {
		_, err = horizon.AddCorrection(f.ctx, f.pool, idem.Identity{TenantID: "t1", OperationID: "op-6"}, reason, "alice")
		assert.ErrorIs(t, err, horizon.ErrInvalidCorrection, "%q", reason)
	}
	before := f.primaryNow().Add(-time.Hour)
	rep, err := horizon.Check(f.ctx, f.pool, horizon.CheckOptions{Class: projClass, Before: &before})
	require.NoError(t, err)
	m := evidenceOf(t, rep, horizon.ManualSource)
	assert.Equal(t, horizon.Enumerating, m.Mode)
	assert.EqualValues(t, 1, m.Pinned)
	assert.Equal(t, horizon.VerdictClosed, m.Verdict)
	assert.True(t, rep.Unbounded, "the manual source alone bounds nothing outside")
	assert.False(t, rep.Proven, "the manual source alone proves nothing about topics, DLQs and archives")

	// An operator plans marking it done; it pins until another person
	// approves.
	change, err := horizon.DoneCorrection(f.ctx, f.bob, c.ID, "bob")
	require.NoError(t, err)
	assert.Equal(t, governance.KindCorrectionDone, change.Kind)
	_, err = horizon.DoneCorrection(f.ctx, f.pool, c.ID, "alice")
	assert.ErrorIs(t, err, governance.ErrState, "already waiting for approval")
	rep, err = horizon.Check(f.ctx, f.pool, horizon.CheckOptions{Class: projClass, Before: &before})
	require.NoError(t, err)
	assert.EqualValues(t, 1, evidenceOf(t, rep, horizon.ManualSource).Pinned, "still pinned while planned")
	_, err = governance.ApproveChange(f.ctx, f.bob, change.ID, "alice")
	assert.ErrorIs(t, err, governance.ErrSamePerson)
	_, err = governance.ApproveChange(f.ctx, f.pool, change.ID, "alice")
	require.NoError(t, err)
	_, err = horizon.DoneCorrection(f.ctx, f.bob, c.ID, "bob")
	assert.ErrorIs(t, err, horizon.ErrCorrectionNotFound)
	pending, err := horizon.ListCorrections(f.ctx, f.pool, false)
	require.NoError(t, err)
	assert.Empty(t, pending)
	all, err := horizon.ListCorrections(f.ctx, f.pool, true)
	require.NoError(t, err)
	require.Len(t, all, 1)
	assert.Equal(t, "bob", all[0].DoneBy)
	rep, err = horizon.Check(f.ctx, f.pool, horizon.CheckOptions{Class: projClass, Before: &before})
	require.NoError(t, err)
	assert.EqualValues(t, 0, evidenceOf(t, rep, horizon.ManualSource).Pinned)
	recs, err := audit.List(f.ctx, f.pool, audit.Filter{Action: "horizon.correction"})
	require.NoError(t, err)
	require.Len(t, recs, 2, "the refused ones recorded nothing")
	persons := map[string]string{}
	for _, r := range recs {
		persons[r.Action] = r.Person
	}
	// The done row is written by the approval (alice's person); it names
	// the planner's.
	assert.Equal(t, map[string]string{"horizon.correction.add": dbtest.PersonOperator, "horizon.correction.done": dbtest.PersonOperator}, persons)
	assert.Contains(t, string(recs[0].Details)+string(recs[1].Details), `"planned_person": "`+dbtest.PersonOperator2+`"`)
}

func TestForeverNeedsContractAndKeepsTombstones(t *testing.T) {
	t.Parallel()
	f := setup(t)
	before := f.primaryNow().Add(-time.Hour)
	_, err := horizon.MakePlan(f.ctx, f.pool, horizon.PlanOptions{Class: "demo.transfer", Before: before, Operator: "alice", AcceptUnbounded: true})
	assert.ErrorIs(t, err, horizon.ErrContractRequired)
	_, err = horizon.MakePlan(f.ctx, f.pool, horizon.PlanOptions{Class: "demo.transfer", Before: before, Operator: "alice",
		Contract: "LEGAL-2026-17", DropTombstones: true, AcceptUnbounded: true})
	assert.ErrorIs(t, err, horizon.ErrForeverTombstones)
	p, err := horizon.MakePlan(f.ctx, f.pool, horizon.PlanOptions{Class: "demo.transfer", Before: before, Operator: "alice",
		Contract: "LEGAL-2026-17", AcceptUnbounded: true})
	require.NoError(t, err)
	assert.Equal(t, "LEGAL-2026-17", p.Contract)
	assert.Equal(t, horizon.Forever, p.Retention)

	// With its contract a forever class is purged, and idem.execute (the SQL
	// effect path, called by the service) answers a late replay purged
	// without posting anything.
	f.seed("demo.transfer", "t1", "pay-", 5, 10*24*time.Hour, time.Minute)
	p, err = horizon.MakePlan(f.ctx, f.pool, horizon.PlanOptions{Class: "demo.transfer", Before: before, Operator: "alice",
		Contract: "LEGAL-2026-17", AcceptUnbounded: true})
	require.NoError(t, err)
	assert.EqualValues(t, 5, p.Candidates)
	_, err = horizon.Approve(f.ctx, f.bob, p.ID, "bob")
	require.NoError(t, err)
	r, err := horizon.Purge(f.ctx, f.bob, p.ID, horizon.PurgeOptions{Operator: "bob"})
	require.NoError(t, err)
	assert.EqualValues(t, 5, r.Plan.Purged)
	res, err := idem.Execute(f.ctx, f.app, idem.Command{Identity: idem.Identity{TenantID: "t1", OperationID: "pay-1"},
		Class: "demo.transfer", Payload: []byte(`{"n":1}`)})
	require.NoError(t, err)
	assert.Equal(t, idem.Purged, res.Outcome)
	res, err = idem.Execute(f.ctx, f.app, idem.Command{Identity: idem.Identity{TenantID: "t1", OperationID: "pay-2"},
		Class: "demo.transfer", Payload: []byte(`{"from":"a","to":"b","amount":5,"currency":"EUR"}`)})
	require.NoError(t, err)
	assert.Equal(t, idem.Conflict, res.Outcome)
	assert.Zero(t, f.count("SELECT count(*) FROM demo.posting"), "nothing ran again")

	// Policy: min-age is a floor on the cutoff.
	minAge := 48 * time.Hour
	pol, change, err := horizon.SetClass(f.ctx, f.pool, projClass, horizon.Horizon, &minAge, "alice", "")
	require.NoError(t, err)
	assert.Zero(t, change, "a horizon class's min-age applies at once")
	assert.Equal(t, minAge, pol.MinAge)
	now := f.primaryNow()
	// A requested cutoff inside the safety margin is refused by the
	// database, min-age or not; just outside it, min-age sets the cutoff.
	_, err = horizon.MakePlan(f.ctx, f.pool, horizon.PlanOptions{Class: projClass, Before: now, Operator: "alice", AcceptUnbounded: true})
	assert.ErrorIs(t, err, horizon.ErrInsideMargin)
	p, err = horizon.MakePlan(f.ctx, f.pool, horizon.PlanOptions{Class: projClass, Before: now.Add(-2 * horizon.DefaultMargin), Operator: "alice", AcceptUnbounded: true})
	require.NoError(t, err)
	assert.WithinDuration(t, now.Add(-minAge), p.Cutoff, time.Minute)
	_, _, err = horizon.SetClass(f.ctx, f.pool, projClass, "sometimes", nil, "alice", "")
	assert.ErrorIs(t, err, horizon.ErrInvalidPolicy)
	// Making a forever class (money) purgeable by horizon alone needs a reason.
	_, _, err = horizon.SetClass(f.ctx, f.pool, "demo.transfer", horizon.Horizon, nil, "alice", "")
	assert.ErrorIs(t, err, horizon.ErrInvalidPolicy)
	got, err := horizon.GetClass(f.ctx, f.pool, "demo.transfer")
	require.NoError(t, err)
	assert.Equal(t, horizon.Forever, got.Retention, "unchanged")
	// With one, it is planned as a governed change that another person's
	// approval applies (with the min-age asked for).
	got, change, err = horizon.SetClass(f.ctx, f.pool, "demo.transfer", horizon.Horizon, &minAge, "alice", "ledger rebuilt from the bank's statements (LEGAL-2026-18)")
	require.NoError(t, err)
	assert.Equal(t, horizon.Forever, got.Retention, "planned, not applied")
	require.NotZero(t, change)
	_, err = governance.ApproveChange(f.ctx, f.pool, change, "bob")
	assert.ErrorIs(t, err, governance.ErrSamePerson, "alice's person cannot approve it, whatever label")
	c, err := governance.ApproveChange(f.ctx, f.bob, change, "bob")
	require.NoError(t, err)
	assert.Equal(t, governance.KindClassRetention, c.Kind)
	got, err = horizon.GetClass(f.ctx, f.pool, "demo.transfer")
	require.NoError(t, err)
	assert.Equal(t, horizon.Horizon, got.Retention, "approved: applied")
	assert.Equal(t, minAge, got.MinAge)
}

func TestFourEyes(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.seed(projClass, "t1", "op-", 5, 10*24*time.Hour, time.Minute)
	p, err := horizon.MakePlan(f.ctx, f.pool, horizon.PlanOptions{Class: projClass, Before: f.primaryNow().Add(-24 * time.Hour), Operator: "alice", AcceptUnbounded: true})
	require.NoError(t, err)
	assert.EqualValues(t, 5, p.Candidates)
	assert.Equal(t, dbtest.PersonOperator, p.PlannedPerson)
	assert.Equal(t, "alice", p.PlannedBy)
	// The planner's person cannot approve, whatever label it gives.
	for _, label := range []string{"alice", "bob"} {
		_, err = horizon.Approve(f.ctx, f.pool, p.ID, label)
		assert.ErrorIs(t, err, horizon.ErrSameOperator, label)
	}
	// A login that maps to no person can neither approve nor purge.
	unmapped := dbtest.PoolAs(t, f.dsn, dbtest.Unmapped, 2)
	_, err = horizon.Approve(f.ctx, unmapped, p.ID, "carol")
	assert.ErrorIs(t, err, horizon.ErrNoPerson)
	_, err = horizon.Purge(f.ctx, f.pool, p.ID, horizon.PurgeOptions{Operator: "alice"})
	assert.ErrorIs(t, err, horizon.ErrPlanState, "a planned plan is not purged")
	p, err = horizon.Approve(f.ctx, f.bob, p.ID, "bob")
	require.NoError(t, err)
	assert.Equal(t, horizon.StateApproved, p.State)
	assert.Equal(t, dbtest.PersonOperator2, p.ApprovedPerson)
	assert.Equal(t, "bob", p.ApprovedBy)
	_, err = horizon.Approve(f.ctx, f.bob, p.ID, "bob")
	assert.ErrorIs(t, err, horizon.ErrPlanState)
	_, err = horizon.Approve(f.ctx, f.bob, 999, "bob")
	assert.ErrorIs(t, err, horizon.ErrPlanNotFound)
	_, err = horizon.Purge(f.ctx, unmapped, p.ID, horizon.PurgeOptions{Operator: "carol"})
	assert.ErrorIs(t, err, horizon.ErrNoPerson)
	assert.EqualValues(t, 5, f.count("SELECT count(*) FROM idem.inbox WHERE op_class = $1", projClass), "nothing purged")
	recs, err := audit.List(f.ctx, f.pool, audit.Filter{Action: "horizon.approve"})
	require.NoError(t, err)
	require.Len(t, recs, 1, "only the approval that counted")
	assert.Equal(t, dbtest.PersonOperator2, recs[0].Person)
}

// TestPurgeAndLateReplays: a purge removes exactly the plan's set (whole days
// swapped, the straddling day and the default partition by batches), keeps
// pinned, quarantined and other-class identities, and a late replay gets
// purged (same payload) or conflict (another), never a second run.
func TestPurgeAndLateReplays(t *testing.T) {
	t.Parallel()
	f := setup(t)
	// Days before any partition (default partition) first, then 12 days of
	// proj.view, one row an hour, and some rows of demo.transfer in the same
	// days.
	f.seedUnpartitioned(projClass, "t2", "old-", 10, 40*24*time.Hour, time.Minute)
	f.seed(projClass, "t1", "op-", 12*24, 12*24*time.Hour, time.Hour)
	f.seed("demo.transfer", "t1", "money-", 50, 12*24*time.Hour, 5*time.Hour)
	require.EqualValues(t, 10, f.count("SELECT count(*) FROM idem.inbox_body_default"))
	// An open quarantine record on t1/op-2 and a DLQ that holds t1/op-3.
	res, ran, err := f.replay("t1", "op-2", `{"n":999}`)
	require.NoError(t, err)
	assert.Equal(t, idem.Conflict, res.Outcome)
	assert.False(t, ran)
	f.businessTable("dlq", "tenant text, op text, ts timestamptz")
	dbtest.Admin(t, f.dsn, "INSERT INTO public.dlq VALUES ('t1', 'op-3', now() - interval '11 days')")
	f.addSource(f.pgSource("dlq", "SELECT tenant, op, ts FROM public.dlq"))

	before := f.primaryNow().Add(-5*24*time.Hour - 30*time.Minute)
	inRange := f.count("SELECT count(*) FROM idem.identity WHERE op_class = $1 AND created_at < $2", projClass, before)
	p := f.planApproved(before)
	assert.EqualValues(t, 2, p.Pinned, "the DLQ identity and the quarantined one")
	assert.Equal(t, inRange-2, p.Candidates)

	var last int64
	r, err := horizon.Purge(f.ctx, f.bob, p.ID, horizon.PurgeOptions{Operator: "bob", BatchRows: 20,
		Progress: func(done, total int64) { last = done }})
	require.NoError(t, err)
	assert.False(t, r.Aborted)
	assert.Equal(t, horizon.StateDone, r.Plan.State)
	assert.Equal(t, p.Candidates, r.Plan.Purged)
	assert.Equal(t, p.Candidates, last)
	assert.Positive(t, r.Swaps, "whole days are swapped")
	assert.Positive(t, r.Batches, "the straddling day and the default partition go by batches")

	// Exactly the plan's set is gone; the rest is still there.
	assert.EqualValues(t, 2, f.count("SELECT count(*) FROM idem.inbox WHERE op_class = $1 AND created_at < $2", projClass, before))
	assert.EqualValues(t, 50, f.count("SELECT count(*) FROM idem.inbox WHERE op_class = 'demo.transfer'"))
	assert.Equal(t, p.Candidates, f.count("SELECT count(*) FROM idem.tombstone WHERE purge_plan = $1", p.ID))
	assert.Equal(t, f.count("SELECT count(*) FROM idem.identity WHERE op_class = $1", projClass)-p.Candidates,
		f.count("SELECT count(*) FROM idem.inbox WHERE op_class = $1", projClass))
	assert.Zero(t, f.count("SELECT count(*) FROM idem.inbox_body_default"), "the default partition's old rows went too")
	var tomb struct {
		hash   string
		purged time.Time
	}
	require.NoError(t, f.pool.QueryRow(f.ctx, "SELECT payload_hash, purged_at FROM idem.tombstone WHERE tenant_id = 't1' AND operation_id = 'op-10'").
		Scan(&tomb.hash, &tomb.purged))
	assert.Equal(t, mustHash(t, `{"n":10}`), tomb.hash)

	// Late replays, by the service.
	res, ran, err = f.replay("t1", "op-10", `{"n":10}`)
	require.NoError(t, err)
	assert.Equal(t, idem.Purged, res.Outcome)
	assert.Nil(t, res.Response)
	assert.False(t, ran)
	res, ran, err = f.replay("t1", "op-10", `{"n":11}`)
	require.NoError(t, err)
	assert.Equal(t, idem.Conflict, res.Outcome)
	assert.NotZero(t, res.QuarantineID)
	assert.False(t, ran)
	var diff, holdsOn string
	require.NoError(t, f.pool.QueryRow(f.ctx, "SELECT diff::text, holds_on FROM idem.quarantine WHERE id = $1", res.QuarantineID).Scan(&diff, &holdsOn))
	assert.Contains(t, diff, "stored_purged")
	assert.Contains(t, diff, fmt.Sprintf(`"purge_plan": %d`, p.ID))
	assert.Equal(t, "identity", holdsOn, "the record holds the tombstone")
	// Screens say so: the stored body was purged, when and by which plan
	// (not "(class only)", which is a conflict of classes).
	rec, err := quarantine.Show(f.ctx, f.pool, res.QuarantineID)
	require.NoError(t, err)
	require.Len(t, rec.Diff, 1)
	assert.Equal(t, quarantine.ChangeStoredPurged, rec.Diff[0].Kind)
	require.NotNil(t, rec.Diff[0].PurgedAt)
	require.NotNil(t, rec.Diff[0].PurgePlan)
	assert.Equal(t, p.ID, *rec.Diff[0].PurgePlan)
	groups, err := quarantine.Groups(f.ctx, f.pool, quarantine.GroupOptions{Filter: quarantine.Filter{Tenant: "t1", Op: "op-10"}})
	require.NoError(t, err)
	require.Len(t, groups, 1)
	assert.Equal(t, "stored body purged "+rec.Diff[0].PurgedAt.UTC().Format("2006-01-02"), groups[0].Changed())
	// The pinned and the quarantined identities still answer from their body.
	res, _, err = f.replay("t1", "op-3", `{"n":3}`)
	require.NoError(t, err)
	assert.Equal(t, idem.AlreadyApplied, res.Outcome)
	assert.JSONEq(t, `{"ok":true}`, string(res.Response))
	res, _, err = f.replay("t1", "op-2", `{"n":2}`)
	require.NoError(t, err)
	assert.Equal(t, idem.AlreadyApplied, res.Outcome)
	assert.JSONEq(t, `{"ok":true}`, string(res.Response))
	// The SQL executor, as a service calls it, says the same.
	var outcome string
	require.NoError(t, f.app.QueryRow(f.ctx, `SELECT outcome FROM idem.claim('t1', 'op-11', $1, '{"n":11}', $2)`, projClass,
		mustHash(t, `{"n":11}`)).Scan(&outcome))
	assert.Equal(t, "purged", outcome)

	recs, err := audit.List(f.ctx, f.pool, audit.Filter{Action: "horizon.purge"})
	require.NoError(t, err)
	require.Len(t, recs, 2)
	assert.Equal(t, "horizon.purge.finish", recs[0].Action)
	assert.Equal(t, dbtest.PersonOperator2, recs[0].Person)
	assert.Contains(t, string(recs[0].Details), fmt.Sprintf(`"purged": %d`, p.Candidates))
	assert.Equal(t, "horizon.purge.start", recs[1].Action)

	// Tombstones of a horizon class go after a second proof, approved by
	// another person.
	tp, err := horizon.MakePlan(f.ctx, f.pool, horizon.PlanOptions{Class: projClass, Before: before, Operator: "alice", DropTombstones: true, AcceptUnbounded: true})
	require.NoError(t, err)
	// op-10's tombstone is held by the conflict quarantined above.
	assert.Equal(t, p.Candidates-1, tp.Candidates)
	_, err = horizon.Approve(f.ctx, f.pool, tp.ID, "alice")
	assert.ErrorIs(t, err, horizon.ErrSameOperator)
	_, err = horizon.Approve(f.ctx, f.bob, tp.ID, "bob")
	require.NoError(t, err)
	tr, err := horizon.Purge(f.ctx, f.bob, tp.ID, horizon.PurgeOptions{Operator: "bob"})
	require.NoError(t, err)
	assert.Equal(t, p.Candidates-1, tr.Plan.Purged)
	assert.EqualValues(t, 1, f.count("SELECT count(*) FROM idem.tombstone WHERE operation_id = 'op-10'"))
	assert.EqualValues(t, 1, f.count("SELECT count(*) FROM idem.identity WHERE op_class = $1 AND created_at < $2", projClass, before)-
		f.count("SELECT count(*) FROM idem.inbox WHERE op_class = $1 AND created_at < $2", projClass, before))
}

func mustHash(t *testing.T, payload string) string {
	t.Helper()
	_, h, err := idem.Canonicalize([]byte(payload), idem.PayloadLimits{})
	require.NoError(t, err)
	return h
}

// TestCorrectionAfterApprovalAbortsPurge: a correction added between approval
// and purge pins an identity inside the purge set: the purge aborts and
// deletes nothing.
func TestCorrectionAfterApprovalAbortsPurge(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.seed(projClass, "t1", "op-", 20, 10*24*time.Hour, time.Minute)
	p := f.planApproved(f.primaryNow().Add(-24 * time.Hour))
	_, err := horizon.AddCorrection(f.ctx, f.pool, idem.Identity{TenantID: "t1", OperationID: "op-7"}, "chargeback fix", "alice")
	require.NoError(t, err)
	r, err := horizon.Purge(f.ctx, f.bob, p.ID, horizon.PurgeOptions{Operator: "bob"})
	require.NoError(t, err)
	assert.True(t, r.Aborted)
	assert.Contains(t, r.AbortReason, "manual pins t1/op-7")
	assert.Equal(t, horizon.StateAborted, r.Plan.State)
	assert.EqualValues(t, 20, f.count("SELECT count(*) FROM idem.inbox"), "nothing deleted")
	_, err = horizon.Purge(f.ctx, f.bob, p.ID, horizon.PurgeOptions{Operator: "bob"})
	assert.ErrorIs(t, err, horizon.ErrPlanState, "an aborted plan needs a new plan")
	recs, err := audit.List(f.ctx, f.pool, audit.Filter{Action: "horizon.purge.abort"})
	require.NoError(t, err)
	assert.Len(t, recs, 1)
	assert.Zero(t, f.count("SELECT count(*) FROM idem.audit WHERE action = 'horizon.purge.start'"), "it never began")

	// An operator may cancel a plan before its purge; it is never purged, and
	// says why.
	p3 := f.planApproved(f.primaryNow().Add(-24 * time.Hour))
	_, err = horizon.Cancel(f.ctx, f.pool, p3.ID, "alice", "")
	assert.ErrorIs(t, err, horizon.ErrInvalidOperator, "a cancellation needs a reason")
	c, err := horizon.Cancel(f.ctx, f.pool, p3.ID, "alice", "wrong cutoff")
	require.NoError(t, err)
	assert.Equal(t, horizon.StateAborted, c.State)
	assert.Equal(t, "wrong cutoff", c.AbortReason)
	_, err = horizon.Cancel(f.ctx, f.pool, p3.ID, "alice", "again")
	assert.ErrorIs(t, err, horizon.ErrPlanState)
	_, err = horizon.Purge(f.ctx, f.bob, p3.ID, horizon.PurgeOptions{Operator: "bob"})
	assert.ErrorIs(t, err, horizon.ErrPlanState)
	assert.EqualValues(t, 20, f.count("SELECT count(*) FROM idem.inbox"))

	// An older bound appearing after approval aborts too.
	p2 := f.planApproved(f.primaryNow().Add(-24 * time.Hour))
	f.businessTable("outbox", "ts timestamptz")
	f.addSource(f.pgSource("outbox", "SELECT min(ts) FROM public.outbox"))
	dbtest.Admin(t, f.dsn, "INSERT INTO public.outbox VALUES (now() - interval '30 days')")
	r, err = horizon.Purge(f.ctx, f.bob, p2.ID, horizon.PurgeOptions{Operator: "bob"})
	require.NoError(t, err)
	assert.True(t, r.Aborted)
	assert.Contains(t, r.AbortReason, "outbox (open)")
	assert.EqualValues(t, 20, f.count("SELECT count(*) FROM idem.inbox"))
}

// TestInterruptedPurgeResumes: a purge stopped between batches resumes and
// ends having removed exactly the plan's set.
func TestInterruptedPurgeResumes(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.seed(projClass, "t1", "op-", 500, 10*24*time.Hour, 10*time.Minute)
	_, err := horizon.AddCorrection(f.ctx, f.pool, idem.Identity{TenantID: "t1", OperationID: "op-9"}, "pending", "alice")
	require.NoError(t, err)
	before := f.primaryNow().Add(-8 * 24 * time.Hour)
	p := f.planApproved(before)
	require.EqualValues(t, 1, p.Pinned)
	ctx, cancel := context.WithCancel(f.ctx)
	r, err := horizon.Purge(ctx, f.bob, p.ID, horizon.PurgeOptions{Operator: "bob", BatchRows: 25, KeepRatio: -1,
		Progress: func(done, total int64) {
			if done >= 50 {
				cancel()
			}
		}})
	assert.ErrorIs(t, err, horizon.ErrInterrupted)
	assert.Equal(t, horizon.StatePurging, r.Plan.State)
	assert.Less(t, r.Plan.Purged, p.Candidates)
	assert.Positive(t, r.Plan.Purged)
	// Another person resumes it: the interrupted run's session is gone, and
	// its runner's lock with it.
	r2, err := horizon.Purge(f.ctx, f.pool, p.ID, horizon.PurgeOptions{Operator: "alice", BatchRows: 25})
	require.NoError(t, err)
	assert.Equal(t, horizon.StateDone, r2.Plan.State)
	assert.Equal(t, p.Candidates, r2.Plan.Purged)
	assert.Equal(t, p.Candidates, r.Purged+r2.Purged)
	assert.EqualValues(t, 1, f.count("SELECT count(*) FROM idem.inbox WHERE created_at < $1", before), "only the pinned one")
	assert.Equal(t, p.Candidates, f.count("SELECT count(*) FROM idem.tombstone"))
	assert.Equal(t, int64(r2.Plan.Batches), f.count("SELECT count(*) FROM idem.horizon_batch WHERE plan_id = $1", p.ID))
	var resumed bool
	require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT (details::jsonb ->> 'resumed')::boolean FROM idem.audit
		WHERE action = 'horizon.purge.start' AND target = $1 ORDER BY id DESC LIMIT 1`, fmt.Sprintf("horizon_plan:%d", p.ID)).Scan(&resumed))
	assert.True(t, resumed)
}

// TestReplayRacingPurge: replays of the purged identities while the purge
// runs never run the operation again: each is already_applied or purged.
func TestReplayRacingPurge(t *testing.T) {
	t.Run("batches", func(t *testing.T) { replayRacingPurge(t, -1) })
	t.Run("swap", func(t *testing.T) { replayRacingPurge(t, 0) })
}

func replayRacingPurge(t *testing.T, keepRatio float64) {
	f := setup(t)
	const n = 300
	f.seed(projClass, "t1", "op-", n, 10*24*time.Hour, time.Minute)
	p := f.planApproved(f.primaryNow().Add(-24 * time.Hour))
	var runs atomic.Int64
	outcomes := sync.Map{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for round := 0; round < 3; round++ {
				for i := 1 + w; i <= n; i += 4 {
					res, ran, err := f.replay("t1", fmt.Sprintf("op-%d", i), fmt.Sprintf(`{"n":%d}`, i))
					if err != nil {
						t.Error(err)
						return
					}
					if ran {
						runs.Add(1)
					}
					v, _ := outcomes.LoadOrStore(res.Outcome, new(atomic.Int64))
					v.(*atomic.Int64).Add(1)
				}
			}
		}()
	}
	close(start)
	r, err := horizon.Purge(f.ctx, f.bob, p.ID, horizon.PurgeOptions{Operator: "bob", BatchRows: 10, KeepRatio: keepRatio})
	wg.Wait()
	require.NoError(t, err)
	assert.EqualValues(t, n, r.Plan.Purged)
	if keepRatio < 0 {
		assert.Positive(t, r.Batches)
	} else {
		assert.Positive(t, r.Swaps)
	}
	assert.Zero(t, runs.Load(), "no replay re-executed")
	total := int64(0)
	outcomes.Range(func(k, v any) bool {
		assert.Contains(t, []idem.Outcome{idem.AlreadyApplied, idem.Purged}, k)
		total += v.(*atomic.Int64).Load()
		return true
	})
	assert.EqualValues(t, 3*n, total)
	res, ran, err := f.replay("t1", "op-1", `{"n":1}`)
	require.NoError(t, err)
	assert.Equal(t, idem.Purged, res.Outcome)
	assert.False(t, ran)
}

func TestSourceValidation(t *testing.T) {
	t.Parallel()
	cases := []horizon.Source{
		{Name: "Bad Name", Kind: horizon.KindArchive, Config: horizon.SourceConfig{Dir: "/tmp"}},
		{Name: "bad\x1b[2Jname", Kind: horizon.KindArchive, Config: horizon.SourceConfig{Dir: "/tmp"}},
		{Name: "manual", Kind: horizon.KindArchive, Config: horizon.SourceConfig{Dir: "/tmp"}},
		{Name: "pg", Kind: horizon.KindPostgres, Config: horizon.SourceConfig{DSN: "postgres://x@h/db"}},
		{Name: "pg", Kind: horizon.KindPostgres, Config: horizon.SourceConfig{DSN: "postgres://x@h/db", Query: "SELECT now()", PasswordEnv: "1NOT-A-NAME"}},
		{Name: "a", Kind: horizon.KindArchive},
		{Name: "n", Kind: horizon.KindNATS, Config: horizon.SourceConfig{URL: "nats://x"}},
		{Name: "k", Kind: horizon.KindKafka, Config: horizon.SourceConfig{Topic: "t"}},
		{Name: "k", Kind: horizon.KindKafka, Config: horizon.SourceConfig{Brokers: []string{"b"}, Topic: "t", Mode: "guess"}},
		{Name: "x", Kind: "smoke-signals"},
	}
	for _, s := range cases {
		assert.ErrorIs(t, s.Validate(), horizon.ErrInvalidSource, "%+v", s)
	}
	// Secrets are never stored: a password in any form is refused, and the
	// refusal does not echo it.
	for _, s := range []horizon.Source{
		{Name: "pg", Kind: horizon.KindPostgres, Config: horizon.SourceConfig{DSN: "postgres://u:hunter2@h/db", Query: "SELECT now()"}},
		{Name: "pg", Kind: horizon.KindPostgres, Config: horizon.SourceConfig{DSN: "host=h user=u password=hunter2", Query: "SELECT now()"}},
		{Name: "pg", Kind: horizon.KindPostgres, Config: horizon.SourceConfig{DSN: "postgres://u@h/db?sslpassword=hunter2", Query: "SELECT now()"}},
		{Name: "n", Kind: horizon.KindNATS, Config: horizon.SourceConfig{URL: "nats://u:hunter2@h:4222", Stream: "S"}},
	} {
		err := s.Validate()
		assert.ErrorIs(t, err, horizon.ErrSecretInConfig, "%+v", s.Config)
		assert.NotContains(t, fmt.Sprint(err), "hunter2")
	}
	s := horizon.Source{Name: "pg", Kind: horizon.KindPostgres,
		Config: horizon.SourceConfig{DSN: "postgres://u@h/db", PasswordEnv: "IDEMCTL_SOURCE_DLQ_PASSWORD", Query: "SELECT now()"}}
	require.NoError(t, s.Validate())
	// A source that holds a secret anyway (one never validated) is shown redacted.
	s.Config.DSN = "postgres://u:hunter2@h/db"
	b, err := json.Marshal(s.Redacted())
	require.NoError(t, err)
	assert.NotContains(t, string(b), "hunter2")
	assert.NotContains(t, s.Describe(), "hunter2")
}

func TestSourcesAreAudited(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.addSource(horizon.Source{Name: "pg", Kind: horizon.KindPostgres,
		Config: horizon.SourceConfig{DSN: "postgres://u@127.0.0.1/db", PasswordEnv: "IDEMCTL_SOURCE_DLQ_PASSWORD", Query: "SELECT now()"}})
	err := horizon.AddSource(f.ctx, f.pool, horizon.Source{Name: "pg", Kind: horizon.KindArchive, Config: horizon.SourceConfig{Dir: "/x"}}, "alice")
	assert.ErrorIs(t, err, horizon.ErrSourceExists)
	// A password is refused before anything is stored or audited.
	err = horizon.AddSource(f.ctx, f.pool, horizon.Source{Name: "pg2", Kind: horizon.KindPostgres,
		Config: horizon.SourceConfig{DSN: "postgres://u:hunter2@127.0.0.1/db", Query: "SELECT now()"}}, "alice")
	assert.ErrorIs(t, err, horizon.ErrSecretInConfig)
	assert.NotContains(t, err.Error(), "hunter2")
	list, err := horizon.ListSources(f.ctx, f.pool)
	require.NoError(t, err)
	require.Len(t, list, 2)
	assert.Equal(t, horizon.ManualSource, list[0].Name)
	assert.Equal(t, "pg", list[1].Name)
	assert.Equal(t, "IDEMCTL_SOURCE_DLQ_PASSWORD", list[1].Config.PasswordEnv)
	assert.Equal(t, "alice", list[1].CreatedBy)
	f.removeSource("pg")
	_, err = horizon.RemoveSource(f.ctx, f.pool, "pg", "alice", "gone")
	assert.ErrorIs(t, err, horizon.ErrSourceNotFound)
	recs, err := audit.List(f.ctx, f.pool, audit.Filter{Action: "horizon.source"})
	require.NoError(t, err)
	require.Len(t, recs, 2)
	assert.Equal(t, "horizon.source.remove", recs[0].Action)
	assert.Equal(t, "horizon.source.add", recs[1].Action)
	for _, r := range recs {
		assert.NotContains(t, string(r.Details), "hunter2")
		assert.Contains(t, string(r.Details), "IDEMCTL_SOURCE_DLQ_PASSWORD", "the record says where the password comes from")
	}
	assert.Equal(t, dbtest.PersonOperator2, recs[0].Person, "the approval removes the source")
	assert.Equal(t, dbtest.PersonOperator, recs[1].Person)
	_, err = horizon.RemoveSource(f.ctx, f.pool, "nope", "alice", "gone")
	assert.ErrorIs(t, err, horizon.ErrSourceNotFound)
	// A service's login cannot manage sources at all.
	err = horizon.AddSource(f.ctx, f.app, horizon.Source{Name: "app", Kind: horizon.KindArchive, Config: horizon.SourceConfig{Dir: "/x"}}, "svc")
	assert.Error(t, err)
	assert.Zero(t, f.count("SELECT count(*) FROM idem.horizon_source"))
}

// A plan resting on the manual source alone is refused unless the operator
// accepts an unbounded horizon; with a real source, it is not needed.
func TestPlanNeedsASourceBesidesTheManualOne(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.seed(projClass, "t1", "op-", 10, 10*24*time.Hour, time.Minute)
	before := f.primaryNow().Add(-24 * time.Hour)
	_, err := horizon.MakePlan(f.ctx, f.pool, horizon.PlanOptions{Class: projClass, Before: before, Operator: "alice"})
	require.ErrorIs(t, err, horizon.ErrUnboundedHorizon)
	assert.Contains(t, err.Error(), "--accept-unbounded-horizon")
	assert.Zero(t, f.count("SELECT count(*) FROM idem.horizon_plan"), "a refused plan records nothing")

	p, err := horizon.MakePlan(f.ctx, f.pool, horizon.PlanOptions{Class: projClass, Before: before, Operator: "alice", AcceptUnbounded: true})
	require.NoError(t, err)
	assert.NotZero(t, p.ID)
}

// A plan expires: past it the database refuses to approve it or to start its
// purge (its proof is stale); the expiry is bounded.
func TestPlanExpires(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.seed(projClass, "t1", "op-", 10, 10*24*time.Hour, time.Minute)
	before := f.primaryNow().Add(-24 * time.Hour)
	for _, d := range []time.Duration{time.Second, 31 * 24 * time.Hour} {
		_, err := horizon.MakePlan(f.ctx, f.pool, horizon.PlanOptions{Class: projClass, Before: before, Operator: "alice",
			AcceptUnbounded: true, ExpiresIn: d})
		assert.ErrorIs(t, err, horizon.ErrInvalidPolicy, "expires in %s", d)
	}
	p, err := horizon.MakePlan(f.ctx, f.pool, horizon.PlanOptions{Class: projClass, Before: before, Operator: "alice",
		AcceptUnbounded: true})
	require.NoError(t, err)
	require.NotNil(t, p.ExpiresAt)
	assert.WithinDuration(t, f.primaryNow().Add(horizon.DefaultPlanExpiry), *p.ExpiresAt, time.Minute)

	// The plan's clock runs out (moved by the schema owner, as time would).
	dbtest.Admin(t, f.dsn, fmt.Sprintf("UPDATE idem.horizon_plan SET expires_at = now() - interval '1 second' WHERE id = %d", p.ID))
	_, err = horizon.Approve(f.ctx, f.bob, p.ID, "bob")
	require.ErrorIs(t, err, horizon.ErrPlanExpired)
	assert.Contains(t, err.Error(), "stale")
	got, err := horizon.GetPlan(f.ctx, f.pool, p.ID)
	require.NoError(t, err)
	assert.Equal(t, horizon.StatePlanned, got.State, "nothing approved")

	// Approved in time, then expired before its purge started: refused too.
	p2, err := horizon.MakePlan(f.ctx, f.pool, horizon.PlanOptions{Class: projClass, Before: before, Operator: "alice",
		AcceptUnbounded: true})
	require.NoError(t, err)
	_, err = horizon.Approve(f.ctx, f.bob, p2.ID, "bob")
	require.NoError(t, err)
	dbtest.Admin(t, f.dsn, fmt.Sprintf("UPDATE idem.horizon_plan SET expires_at = now() - interval '1 second' WHERE id = %d", p2.ID))
	_, err = horizon.Purge(f.ctx, f.pool, p2.ID, horizon.PurgeOptions{Operator: "alice"})
	require.ErrorIs(t, err, horizon.ErrPlanExpired)
	assert.EqualValues(t, 10, f.count("SELECT count(*) FROM idem.inbox_body WHERE op_class = $1", projClass), "nothing purged")
}
