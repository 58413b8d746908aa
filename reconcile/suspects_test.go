package reconcile_test

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/reconcile"
)

// Every planted retry under a new id is found, grouped with its original;
// the same payload in another tenant, in another class, or further apart
// than the window is not a suspect, and a class declared as repeating its
// payloads is left out.
func TestSuspectsFindsRetriesWithNewIDs(t *testing.T) {
	t.Parallel()
	f := setup(t)
	dbtest.RegisterAppClass(t, f.dsn, "pay.charge", "forever")
	dbtest.RegisterAppClass(t, f.dsn, "proj.tick", "horizon")
	// payloads {"n":1..100}, one a second from 2h ago
	dbtest.Seed(t, f.dsn, "pay.charge", "acme", "a-", 100, 2*time.Hour, time.Second)
	// 20 retries of a-1..a-20 under new ids, at the same times (planted)
	dbtest.Seed(t, f.dsn, "pay.charge", "acme", "retry-", 20, 2*time.Hour, time.Second)
	// legitimate repeats: the same payloads in another tenant, and again in
	// acme 30 minutes later (outside a 10-minute window)
	dbtest.Seed(t, f.dsn, "pay.charge", "globex", "g-", 100, 2*time.Hour, time.Second)
	dbtest.Seed(t, f.dsn, "pay.charge", "acme", "later-", 10, 90*time.Minute, time.Second)
	// a class whose payloads repeat by nature
	dbtest.Seed(t, f.dsn, "proj.tick", "acme", "t1-", 10, 2*time.Hour, time.Second)
	dbtest.Seed(t, f.dsn, "proj.tick", "acme", "t2-", 10, 2*time.Hour, time.Second)

	q := reconcile.SuspectsQuery{Since: f.now().Add(-24 * time.Hour), Window: 10 * time.Minute, Exclude: []string{"proj.tick"}}
	groups, err := reconcile.FindSuspects(f.ctx, f.pool, q)
	require.NoError(t, err)
	var pairs []string
	for _, g := range groups {
		require.Len(t, g.Operations, 2, "%+v", g)
		assert.Equal(t, "acme", g.Tenant)
		assert.Equal(t, "pay.charge", g.Class)
		ids := []string{g.Operations[0].OperationID, g.Operations[1].OperationID}
		sort.Strings(ids)
		pairs = append(pairs, ids[0]+"+"+ids[1])
	}
	var want []string
	for i := 1; i <= 20; i++ {
		want = append(want, fmt.Sprintf("a-%d+retry-%d", i, i))
	}
	sort.Strings(want)
	sort.Strings(pairs)
	assert.Equal(t, want, pairs)

	// Without the declaration the repeating class is listed; --class limits.
	q.Exclude = nil
	groups, err = reconcile.FindSuspects(f.ctx, f.pool, q)
	require.NoError(t, err)
	assert.Len(t, groups, 30)
	q.Classes = []string{"proj.tick"}
	groups, err = reconcile.FindSuspects(f.ctx, f.pool, q)
	require.NoError(t, err)
	assert.Len(t, groups, 10)
	// A wide window joins the later repeats to their groups.
	groups, err = reconcile.FindSuspects(f.ctx, f.pool, reconcile.SuspectsQuery{Since: q.Since, Window: time.Hour, Classes: []string{"pay.charge"}})
	require.NoError(t, err)
	assert.Len(t, groups, 20, "a-1..a-20, each with its retry, and later-1..10 with the first ten")
	// Declared once instead of a flag on every run: one operator with a
	// reason, audited; named with --class it is listed again.
	operator := dbtest.PoolAs(t, f.dsn, dbtest.Operator, 1)
	_, err = reconcile.DeclareRepeats(f.ctx, operator, "proj.tick", true, "alice", "")
	assert.ErrorIs(t, err, reconcile.ErrRefusedDeclaration, "a reason is required")
	_, err = reconcile.DeclareRepeats(f.ctx, operator, "no.such", true, "alice", "x")
	assert.ErrorIs(t, err, reconcile.ErrUnknownClass)
	before, err := reconcile.DeclareRepeats(f.ctx, operator, "proj.tick", true, "alice", "a projection's tick (OPS-12)")
	require.NoError(t, err)
	assert.False(t, before)
	declared := reconcile.SuspectsQuery{Since: q.Since, Window: 10 * time.Minute}
	groups, err = reconcile.FindSuspects(f.ctx, f.pool, declared)
	require.NoError(t, err)
	assert.Len(t, groups, 20, "the declared class is left out")
	for _, g := range groups {
		assert.Equal(t, "pay.charge", g.Class)
	}
	declared.Classes = []string{"proj.tick"}
	groups, err = reconcile.FindSuspects(f.ctx, f.pool, declared)
	require.NoError(t, err)
	assert.Len(t, groups, 10, "named, it is listed")
	var audited int
	require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT count(*) FROM idem.audit WHERE action = 'class.payloads_repeat'
		AND target = 'class:proj.tick' AND person = 'alice'`).Scan(&audited))
	assert.Equal(t, 1, audited)
	app := dbtest.PoolAs(t, f.dsn, dbtest.App, 1)
	_, err = reconcile.DeclareRepeats(f.ctx, app, "pay.charge", true, "app", "x")
	assert.Error(t, err, "an app login cannot declare it")
	before, err = reconcile.DeclareRepeats(f.ctx, operator, "proj.tick", false, "alice", "OPS-13")
	require.NoError(t, err)
	assert.True(t, before)

	// The auditor's login is enough.
	auditor := dbtest.PoolAs(t, f.dsn, dbtest.Auditor, 1)
	_, err = reconcile.FindSuspects(f.ctx, auditor, q)
	require.NoError(t, err)
}

// TestSuspectsMillion measures suspects over a day of 1,000,000 operations
// of one class with 1,000 planted retries (IDEMCTL_BENCH_SUSPECTS=1; it
// seeds for minutes).
func TestSuspectsMillion(t *testing.T) {
	if os.Getenv("IDEMCTL_BENCH_SUSPECTS") == "" {
		t.Skip("SKIPPED LOUDLY: a measurement over 1,000,000 operations that seeds for minutes; run it with IDEMCTL_BENCH_SUSPECTS=1 go test ./reconcile -run TestSuspectsMillion -v (its figure is in BENCHMARKS.md)")
	}
	f := setup(t)
	dbtest.RegisterAppClass(t, f.dsn, "pay.charge", "forever")
	for i := 0; i < 4; i++ {
		// 250k operations per tenant over 20 hours; the payloads
		// {"n":1..250000} repeat across tenants: not suspects.
		dbtest.Seed(t, f.dsn, "pay.charge", fmt.Sprintf("tenant-%d", i), "op-", 250_000, 20*time.Hour, 288*time.Millisecond)
	}
	dbtest.Seed(t, f.dsn, "pay.charge", "tenant-0", "retry-", 1000, 20*time.Hour, 288*time.Millisecond)
	dbtest.Admin(t, f.dsn, "ANALYZE idem.identity")
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	groups, err := reconcile.FindSuspects(f.ctx, f.pool, reconcile.SuspectsQuery{Since: f.now().Add(-24 * time.Hour)})
	elapsed := time.Since(start)
	require.NoError(t, err)
	assert.Len(t, groups, 1000)
	t.Logf("suspects over 1,001,000 operations: %d groups in %s", len(groups), elapsed.Round(time.Millisecond))
}
