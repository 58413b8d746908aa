package recovery_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/recovery"
)

// The same identity on several lines of one input, at high concurrency: the
// lines of one payload run in file order (the first applies, a later one is
// already applied); an identity the input holds with two payloads is a
// conflict on every line, with nothing written; and a dry run predicts
// exactly that.
func TestSameIdentityRunsInFileOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, 7)
	const pairs = 600
	var in strings.Builder
	var want []recovery.Outcome
	for i := range pairs {
		op := fmt.Sprint("op-", i)
		fmt.Fprintln(&in, line("dup", op, 1))
		if i%2 == 0 {
			fmt.Fprintln(&in, line("dup", op, 1))
			want = append(want, recovery.Applied, recovery.AlreadyApplied)
		} else {
			fmt.Fprintln(&in, line("dup", op, 2))
			want = append(want, recovery.Conflict, recovery.Conflict)
		}
		if i%5 == 0 {
			fmt.Fprintln(&in, line("dup", op, 1))
			want = append(want, want[len(want)-1])
		}
	}
	predicted := map[recovery.Outcome]recovery.Outcome{recovery.Applied: recovery.WouldApply,
		recovery.Conflict: recovery.Conflict, recovery.AlreadyApplied: recovery.AlreadyApplied}

	for _, batch := range []int{1, 7, 5000} {
		_, res, err := b.resolve(t, recovery.Config{DryRun: true, Concurrency: 6, BatchSize: batch}, in.String())
		require.NoError(t, err)
		require.Len(t, res, len(want))
		for i, r := range res {
			require.Equal(t, predicted[want[i]], r.Outcome, "dry run, batch %d, line %d", batch, r.Line)
		}
		assert.Contains(t, res[1].Note, "line 1", "an already_applied within the input names the earlier line")
		assert.Contains(t, res[3].Note, "another payload at line 5", "an input conflict names the other line")
		assert.Contains(t, res[4].Note, "another payload at line 4")
		assert.Equal(t, [3]int{0, 0, 0}, b.rowCounts(t), "a dry run writes nothing")
	}

	sum, res, err := b.resolve(t, recovery.Config{Concurrency: 6}, in.String())
	require.NoError(t, err)
	require.Len(t, res, len(want))
	for i, r := range res {
		require.Equal(t, want[i], r.Outcome, "line %d", r.Line)
	}
	assert.Equal(t, pairs/2, sum.Counts[recovery.Applied])
	assert.Equal(t, pairs/2, b.count(t, "SELECT count(*) FROM idem.inbox WHERE tenant_id = 'dup'"), "nothing written for the identities of two payloads")
	assert.Zero(t, b.count(t, "SELECT count(*) FROM idem.quarantine"), "nothing quarantined: the primary holds none of them")
}

// An error writing results (stdout closed, disk full) ends the run: reading
// stops, what was in flight finishes, nothing after the failure is run beyond
// the in-flight window, the counts are what was done (not what was written),
// and the run is recorded with them.
func TestEmitErrorEndsRun(t *testing.T) {
	t.Parallel()
	for _, dry := range []bool{false, true} {
		t.Run(fmt.Sprintf("dry=%v", dry), func(t *testing.T) {
			t.Parallel()
			b := setup(t, 3)
			const n, window, failAt = 2000, 64, 10
			var in strings.Builder
			for i := range n {
				fmt.Fprintln(&in, line("t", fmt.Sprint("op-", i), i+1))
			}
			var records []recovery.RunSummary
			r := &recovery.Resolver{Pool: b.pool, Config: recovery.Config{DryRun: dry, Concurrency: 2, Window: window, BatchSize: 16, Operator: "ada",
				RecordRun: func(_ context.Context, s recovery.RunSummary) error { records = append(records, s); return nil }}}
			emitted := 0
			sum, err := r.Run(b.ctx, recovery.NDJSON(strings.NewReader(in.String()), 1<<20), func(recovery.Result) error {
				emitted++
				if emitted >= failAt {
					return io.ErrClosedPipe
				}
				return nil
			})
			require.ErrorIs(t, err, io.ErrClosedPipe)
			assert.Equal(t, failAt, emitted, "nothing is written after the failure")
			assert.True(t, sum.Interrupted, "reading stopped")
			assert.Less(t, sum.Read, n)
			assert.LessOrEqual(t, sum.Counts.Total(), failAt+window, "nothing beyond the in-flight window ran")
			assert.GreaterOrEqual(t, sum.Counts.Total(), failAt)
			if !dry {
				assert.Equal(t, recovery.Counts{recovery.Applied: b.count(t, "SELECT count(*) FROM demo.posting")}, sum.Counts,
					"the counts are what the database holds")
			}
			require.Len(t, records, 1, "the run is recorded")
			assert.Equal(t, sum.Counts, records[0].Counts)
			assert.ErrorIs(t, records[0].WriteErr, io.ErrClosedPipe)
		})
	}
}

// An identity claimed without an effect (a misbehaving service calling
// idem.claim on a class whose effect is SQL) is refused at once: nothing is
// written, and resolve would apply it. A body without a
// saved response can then only be damage done behind the database's back
// (a superuser with triggers disabled, a hand-edited restore): it is not
// reported as converged, in a real run or a dry run, and nothing is written.
func TestAlreadyAppliedWithoutResponse(t *testing.T) {
	t.Parallel()
	b := setup(t, 3)
	p, err := idem.Prepare(transfer("acme", "half", 5), idem.PayloadLimits{})
	require.NoError(t, err)
	claimThenCommit := func(conn *pgx.Conn) error {
		tx, err := conn.Begin(b.ctx)
		require.NoError(t, err)
		defer tx.Rollback(context.Background())
		_, claimed, err := idem.Claim(b.ctx, tx, p)
		require.NoError(t, err)
		require.True(t, claimed)
		return tx.Commit(b.ctx)
	}

	// The service, with the app role's login: the claim is refused.
	app, err := pgx.Connect(b.ctx, dbtest.As(b.dsn, dbtest.App))
	require.NoError(t, err)
	defer app.Close(context.Background())
	tx, err := app.Begin(b.ctx)
	require.NoError(t, err)
	_, _, err = idem.Claim(b.ctx, tx, p)
	assert.ErrorIs(t, err, idem.ErrSQLEffectClass)
	require.NoError(t, tx.Rollback(b.ctx))
	assert.Equal(t, [3]int{0, 0, 0}, b.rowCounts(t), "no marker without its effect")
	_, res, err := b.resolve(t, recovery.Config{DryRun: true}, line("acme", "half", 5))
	require.NoError(t, err)
	assert.Equal(t, []recovery.Outcome{recovery.WouldApply}, outcomes(res))

	// Damage: a claim committed with the guards' triggers disabled, the
	// class's effect taken off for it by hand.
	admin, err := pgx.Connect(b.ctx, dbtest.As(b.dsn, dbtest.Superuser))
	require.NoError(t, err)
	defer admin.Close(context.Background())
	_, err = admin.Exec(b.ctx, "SET session_replication_role = replica")
	require.NoError(t, err)
	_, err = admin.Exec(b.ctx, "UPDATE idem.op_class SET effect = NULL WHERE name = 'demo.transfer'")
	require.NoError(t, err)
	require.NoError(t, claimThenCommit(admin))
	_, err = admin.Exec(b.ctx, "UPDATE idem.op_class SET effect = 'demo.transfer_effect(text,text,jsonb)'::regprocedure WHERE name = 'demo.transfer'")
	require.NoError(t, err)
	before := b.rowCounts(t)
	require.Equal(t, 1, b.count(t, "SELECT count(*) FROM idem.inbox WHERE operation_id = 'half' AND response IS NULL"))

	for _, dry := range []bool{false, true} {
		sum, res, err := b.resolve(t, recovery.Config{DryRun: dry}, line("acme", "half", 5))
		require.NoError(t, err)
		require.Len(t, res, 1)
		assert.Equal(t, recovery.Failed, res[0].Outcome, "dry run %v", dry)
		assert.ErrorIs(t, res[0].Err, recovery.ErrNoSavedResponse, "dry run %v", dry)
		assert.ErrorContains(t, res[0].Err, "identity exists without a saved response (claimed but never completed); investigate")
		assert.False(t, sum.Converged())
	}
	assert.Equal(t, before, b.rowCounts(t))
}

// A line that is invalid for a reason other than its JSON syntax still says
// which identity it is about, and so does one cut short after it.
func TestInvalidLineKeepsIdentity(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ line, want string }{
		{`{"payload":null,"tenant":"t","operation_id":"o","class":"c"}`, "payload is null"},
		{`{"tenant":"t","operation_id":"o","class":"c","payload":{},"extra":1}`, `unknown field "extra"`},
		{`{"tenant":"t","operation_id":"o","class":"c","payload":{},"transport":[1]}`, "transport must be an object"},
		{`{"tenant":"t","operation_id":"o","class":"c","payload":{"a":`, "not JSON"},
		{`{"tenant":"t","operation_id":"o","operation_id":"p","class":"c","payload":{}}`, "duplicate"},
	} {
		it, err := recovery.NDJSON(strings.NewReader(tc.line), 1<<20).Next()
		require.NoError(t, err)
		require.Error(t, it.Invalid, tc.line)
		assert.Contains(t, it.Invalid.Error(), tc.want, tc.line)
		assert.Equal(t, "t", it.Request.Tenant, tc.line)
		assert.Equal(t, "o", it.Request.OperationID, tc.line)
	}

	b := setup(t, 2)
	_, res, err := b.resolve(t, recovery.Config{}, `{"tenant":"t","operation_id":"o","class":"demo.transfer","payload":{"a":1,"a":2}}`)
	require.NoError(t, err)
	require.Len(t, res, 1)
	assert.Equal(t, recovery.Invalid, res[0].Outcome)
	assert.ErrorContains(t, res[0].Err, "duplicate")
	assert.Equal(t, "t", res[0].Tenant)
	assert.Equal(t, "o", res[0].OperationID)
}
