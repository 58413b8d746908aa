package audit_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/audit"
	"github.com/idemctl/idemctl/internal/dbtest"
)

type bundle struct {
	ctx  context.Context
	pool *pgxpool.Pool // an operator's
	dsn  string
	// base is the last row the template's installation wrote (class and
	// person changes): the test's own rows follow it.
	base int64
}

func setup(t *testing.T, maxConns int32) bundle {
	t.Helper()
	pool, dsn := dbtest.NewPool(t, maxConns)
	b := bundle{ctx: context.Background(), pool: pool, dsn: dsn}
	require.NoError(t, pool.QueryRow(b.ctx, "SELECT last_id FROM idem.audit_head").Scan(&b.base))
	return b
}

func (b bundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(b.ctx, sql, args...).Scan(&n))
	return n
}

// appendN appends n rows and returns them.
func (b bundle) appendN(t *testing.T, n int) []audit.Record {
	t.Helper()
	var out []audit.Record
	for i := 0; i < n; i++ {
		rec, err := audit.Append(b.ctx, b.pool, audit.Entry{
			Actor: "alice", Action: "resolve.step", Target: fmt.Sprintf("thing:%d", i),
			Details: map[string]any{"i": i, "note": "ünïcode \"quoted\" \u2028 <&> \t"},
		})
		require.NoError(t, err)
		out = append(out, rec)
	}
	return out
}

// tamper runs sql as a superuser with the log's triggers disabled, the way
// someone working behind the log's back would.
func (b bundle) tamper(t *testing.T, sql string) {
	t.Helper()
	dbtest.Admin(t, b.dsn, "SET session_replication_role = replica; "+sql)
}

func pgCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

func TestAppendChainsRows(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	report, err := audit.Verify(b.ctx, b.pool)
	require.NoError(t, err)
	assert.True(t, report.Intact, "the installation's log is intact")
	assert.Equal(t, b.base, report.Rows)

	head := report.LastHash
	rows := b.appendN(t, 3)
	for i, r := range rows {
		assert.Equal(t, b.base+int64(i+1), r.ID)
		assert.Equal(t, "alice", r.Actor)
		assert.Equal(t, string(dbtest.Operator), r.DBUser)
		assert.Equal(t, dbtest.PersonOperator, r.Person, "the person behind the login")
		assert.Equal(t, "resolve.step", r.Action)
		assert.Regexp(t, `^sha256:[0-9a-f]{64}$`, r.Hash)
		assert.Equal(t, audit.RowHash(r), r.Hash, "Go and SQL hash the same bytes")
		assert.False(t, r.At.IsZero())
		if i == 0 {
			assert.Equal(t, head, r.PrevHash)
		} else {
			assert.Equal(t, rows[i-1].Hash, r.PrevHash)
		}
	}
	assert.JSONEq(t, `{"i": 0, "note": "ünïcode \"quoted\" \u2028 <&> \t"}`, string(rows[0].Details))

	// A rolled-back append leaves no hole: the next row takes the next number.
	tx, err := b.pool.Begin(b.ctx)
	require.NoError(t, err)
	_, err = audit.Append(b.ctx, tx, audit.Entry{Actor: "bob", Action: "resolve.rolled_back"})
	require.NoError(t, err)
	require.NoError(t, tx.Rollback(b.ctx))
	next, err := audit.Append(b.ctx, b.pool, audit.Entry{Actor: "bob", Action: "resolve.after"})
	require.NoError(t, err)
	assert.Equal(t, b.base+4, next.ID)
	assert.Equal(t, rows[2].Hash, next.PrevHash)
	assert.JSONEq(t, `{}`, string(next.Details))

	// Nobody but the schema owner writes the table: a forged row is refused.
	_, err = b.pool.Exec(b.ctx, `INSERT INTO idem.audit (id, at, actor, db_user, action, details, prev_hash, hash)
		VALUES (99, '2000-01-01', 'carol', 'forged', 'test.sql', '{}', 'x', 'y')`)
	assert.Equal(t, "42501", pgCode(err))

	// The auditor role verifies on its own, with no database function.
	auditor := dbtest.PoolAs(t, b.dsn, dbtest.Auditor, 2)
	report, err = audit.Verify(b.ctx, auditor, audit.Anchor{ID: rows[1].ID, Hash: rows[1].Hash})
	require.NoError(t, err)
	assert.True(t, report.Intact, report.Problem)
	assert.NoError(t, report.Err())
	assert.Equal(t, b.base+4, report.Rows)
	assert.Equal(t, b.base+4, report.HeadID)
	assert.Equal(t, next.Hash, report.HeadHash)
}

// TestReservedActionsAreNotAppendable: a decision, a plan or an approval is
// recorded by the function that makes it; a report cannot pretend to be one.
func TestReservedActionsAreNotAppendable(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	for _, action := range []string{"quarantine.reject", "quarantine.accept_as_new", "horizon.plan", "horizon.approve",
		"horizon.purge.finish", "person.add", "class.register", "test.x"} {
		_, err := audit.Append(b.ctx, b.pool, audit.Entry{Actor: "mallory", Action: action, Target: "quarantine:1"})
		assert.ErrorIs(t, err, audit.ErrReservedAction, action)
	}
	var last int64
	require.NoError(t, b.pool.QueryRow(b.ctx, "SELECT last_id FROM idem.audit_head").Scan(&last))
	assert.Equal(t, b.base, last)
}

func TestAppendOnly(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	b.appendN(t, 2)
	before, err := audit.List(b.ctx, b.pool, audit.Filter{})
	require.NoError(t, err)
	tests := []struct{ sql, code string }{
		{"UPDATE idem.audit SET actor = 'mallory'", "IX110"},
		{"UPDATE idem.audit SET details = '{}' WHERE id = 1", "IX110"},
		{"DELETE FROM idem.audit WHERE id = 2", "IX110"},
		{"TRUNCATE idem.audit", "IX110"},
		{"DELETE FROM idem.audit_head", "IX112"},
		{"TRUNCATE idem.audit_head", "IX112"},
	}
	for _, tc := range tests {
		// An operator may not write the log at all...
		_, err := b.pool.Exec(b.ctx, tc.sql)
		assert.Equal(t, "42501", pgCode(err), "%s: %v", tc.sql, err)
		// ...and the schema owner's own scripts are stopped by its triggers.
		err = dbtest.Owner(b.dsn, tc.sql)
		assert.Equal(t, tc.code, pgCode(err), "%s: %v", tc.sql, err)
	}
	after, err := audit.List(b.ctx, b.pool, audit.Filter{})
	require.NoError(t, err)
	assert.Equal(t, before, after)
}

func TestAppendRefusesBadEntries(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	tests := []struct {
		name string
		e    audit.Entry
	}{
		{"no actor", audit.Entry{Action: "test.x"}},
		{"blank actor", audit.Entry{Actor: "  ", Action: "test.x"}},
		{"long actor", audit.Entry{Actor: strings.Repeat("a", 257), Action: "test.x"}},
		{"no action", audit.Entry{Actor: "alice"}},
		{"upper-case action", audit.Entry{Actor: "alice", Action: "Test.X"}},
		{"action with spaces", audit.Entry{Actor: "alice", Action: "test x"}},
		{"long target", audit.Entry{Actor: "alice", Action: "test.x", Target: strings.Repeat("t", 513)}},
		{"details not an object", audit.Entry{Actor: "alice", Action: "test.x", Details: []int{1}}},
		{"details not JSON", audit.Entry{Actor: "alice", Action: "test.x", Details: func() {}}},
		{"escape in actor", audit.Entry{Actor: "alice\x1b[2J", Action: "resolve.x"}},
	}
	for _, tc := range tests {
		_, err := audit.Append(b.ctx, b.pool, tc.e)
		assert.ErrorIs(t, err, audit.ErrInvalidEntry, tc.name)
	}
	assert.Equal(t, int(b.base), b.count(t, "SELECT count(*) FROM idem.audit"))
	assert.Equal(t, int(b.base), b.count(t, "SELECT last_id FROM idem.audit_head"))

	// The database refuses them too, for writers that call the function directly.
	for _, args := range [][]any{
		{"", "resolve.x", "", "{}"},
		{"alice\x1b]0;pwned\x07", "resolve.x", "", "{}"},
		{"alice", "resolve.x", "", "[1]"},
		{"alice", "resolve.x", "t\x1b[2J", "{}"},
		{"alice", "resolve.x", "", "{\"a\":\n1}"},
	} {
		_, err := b.pool.Exec(b.ctx, "SELECT idem.audit_append($1, $2, $3, $4)", args...)
		assert.Equal(t, "IX111", pgCode(err), "%q", args)
	}
}

// Concurrent writers, each in its own transaction, make one chain.
func TestConcurrentAppendsStayOneChain(t *testing.T) {
	t.Parallel()
	b := setup(t, 8)
	const writers, each = 8, 30
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				err := pgx.BeginFunc(b.ctx, b.pool, func(tx pgx.Tx) error {
					_, err := audit.Append(b.ctx, tx, audit.Entry{
						Actor: fmt.Sprintf("writer-%d", w), Action: "resolve.concurrent", Details: map[string]int{"i": i},
					})
					return err
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	n := writers*each + int(b.base)
	assert.Equal(t, n, b.count(t, "SELECT count(*) FROM idem.audit"))
	assert.Equal(t, n, b.count(t, "SELECT count(DISTINCT prev_hash) FROM idem.audit"), "no fork")
	assert.Equal(t, n, b.count(t, "SELECT max(id) FROM idem.audit"), "no gap")
	report, err := audit.Verify(b.ctx, b.pool)
	require.NoError(t, err)
	assert.True(t, report.Intact, report.Problem)
}

// Under REPEATABLE READ a writer whose snapshot is older than the head fails
// (and retries) rather than forking the chain.
func TestAppendUnderRepeatableReadCannotFork(t *testing.T) {
	t.Parallel()
	b := setup(t, 3)
	b.appendN(t, 1)
	slow, err := b.pool.BeginTx(b.ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	require.NoError(t, err)
	defer slow.Rollback(b.ctx)
	require.NoError(t, slow.QueryRow(b.ctx, "SELECT 1").Scan(new(int))) // take the snapshot
	b.appendN(t, 1)
	_, err = audit.Append(b.ctx, slow, audit.Entry{Actor: "slow", Action: "resolve.slow"})
	assert.Equal(t, "40001", pgCode(err), "%v", err)
	report, err := audit.Verify(b.ctx, b.pool)
	require.NoError(t, err)
	assert.True(t, report.Intact, report.Problem)
}

// TestVerifyFindsTampering: the appended rows are base+1..base+5 (B1..B5
// below); each case tampers as a superuser with triggers off.
func TestVerifyFindsTampering(t *testing.T) {
	t.Parallel()
	rehash := func(actor string) string {
		return `hash = idem.audit_row_hash(id, at, '` + actor + `', person, db_user, action, target, details, prev_hash)`
	}
	tests := []struct {
		name    string
		tamper  string // %[1]d is the base: row B1 is %[1]d+1
		at      int64  // relative to the base
		problem string
	}{
		{"row modified", "UPDATE idem.audit SET details = '{\"i\": 99}' WHERE id = %[1]d + 3",
			3, "its content does not match its hash: the row was modified"},
		{"actor modified", "UPDATE idem.audit SET actor = 'mallory' WHERE id = %[1]d + 5",
			5, "the row was modified"},
		{"person modified", "UPDATE idem.audit SET person = 'bob' WHERE id = %[1]d + 2",
			2, "the row was modified"},
		{"row modified and rehashed", "UPDATE idem.audit SET actor = 'mallory', " + rehash("mallory") + " WHERE id = %[1]d + 3",
			4, "its prev_hash is not the hash of row"},
		{"middle row deleted", "DELETE FROM idem.audit WHERE id = %[1]d + 3",
			3, "is missing (deleted): row"},
		{"two rows deleted", "DELETE FROM idem.audit WHERE id IN (%[1]d + 2, %[1]d + 3)",
			2, "are missing (deleted)"},
		{"last row deleted", "DELETE FROM idem.audit WHERE id = %[1]d + 5",
			5, "is missing (deleted from the end of the log)"},
		{"row inserted with made-up hashes", `INSERT INTO idem.audit VALUES
			(%[1]d + 6, now(), 'mallory', '', 'postgres', 'resolve.step', '', '{}', 'sha256:` + strings.Repeat("1", 64) + `', 'sha256:` + strings.Repeat("2", 64) + `')`,
			6, "its prev_hash is not the hash of row"},
		{"row inserted with a correct chain but the head unmoved", `INSERT INTO idem.audit
			SELECT %[1]d + 6, now(), 'mallory', '', 'postgres', 'resolve.step', '', '{}', h.last_hash,
			       idem.audit_row_hash(%[1]d + 6, now(), 'mallory', '', 'postgres', 'resolve.step', '', '{}', h.last_hash)
			FROM idem.audit_head h`,
			6, "was added behind the log's back"},
		{"row moved away", `UPDATE idem.audit SET id = %[1]d + 7 WHERE id = %[1]d + 3`,
			3, "is missing"},
		{"head deleted", "DELETE FROM idem.audit_head WHERE %[1]d >= 0",
			6, "the chain's head (idem.audit_head) is missing"},
		{"head rolled back", "UPDATE idem.audit_head SET last_id = %[1]d + 4",
			5, "was added behind the log's back"},
		{"last row rewritten with head", "UPDATE idem.audit SET actor = 'mallory', " + rehash("mallory") + " WHERE id = %[1]d + 5",
			5, "its hash differs from the one the head recorded"},
		// The owner replaces the hash function with one that returns the
		// stored hash, and rewrites an actor: verify never asks the database
		// to hash anything, so it is not fooled.
		{"hash function replaced", `SET ROLE idem_owner;
			CREATE OR REPLACE FUNCTION idem.audit_row_hash(p_id bigint, p_at timestamptz, p_actor text, p_person text,
			    p_db_user text, p_action text, p_target text, p_details text, p_prev_hash text)
			RETURNS text LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, idem, pg_temp
			AS $$ SELECT hash FROM idem.audit WHERE id = p_id $$;
			RESET ROLE;
			UPDATE idem.audit SET actor = 'mallory' WHERE id = %[1]d + 2`,
			2, "the row was modified"},
		{"timestamp backdated", "UPDATE idem.audit SET at = '2020-01-01' WHERE id = %[1]d + 1",
			1, "the row was modified"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, 2)
			b.appendN(t, 5)
			report, err := audit.Verify(b.ctx, b.pool)
			require.NoError(t, err)
			require.True(t, report.Intact, report.Problem)

			b.tamper(t, fmt.Sprintf(tc.tamper, b.base))
			report, err = audit.Verify(b.ctx, b.pool)
			require.NoError(t, err)
			assert.False(t, report.Intact)
			assert.Equal(t, b.base+tc.at, report.BrokenAt, report.Problem)
			assert.Contains(t, report.Problem, tc.problem)
			assert.ErrorIs(t, report.Err(), audit.ErrChainBroken)
			assert.ErrorContains(t, report.Err(), fmt.Sprintf("audit chain broken at row %d: ", b.base+tc.at))
		})
	}
}

// Someone with full control can rewrite the chain from some row on, hashes and
// head included; only a hash recorded elsewhere (an anchor) reveals it.
func TestVerifyAnchorRevealsAFullRewrite(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	rows := b.appendN(t, 5)
	anchor := audit.Anchor{ID: rows[2].ID, Hash: rows[2].Hash}
	parsed, err := audit.ParseAnchor(anchor.String())
	require.NoError(t, err)
	require.Equal(t, anchor, parsed)

	var rewrite strings.Builder
	for _, r := range rows[2:] {
		fmt.Fprintf(&rewrite, `UPDATE idem.audit a SET actor = 'mallory',
			prev_hash = (SELECT hash FROM idem.audit WHERE id = a.id - 1),
			hash = idem.audit_row_hash(a.id, a.at, 'mallory', a.person, a.db_user, a.action, a.target, a.details,
			                           (SELECT hash FROM idem.audit WHERE id = a.id - 1))
			WHERE id = %d;`, r.ID)
	}
	rewrite.WriteString("UPDATE idem.audit_head SET last_hash = (SELECT hash FROM idem.audit ORDER BY id DESC LIMIT 1)")
	b.tamper(t, rewrite.String())

	report, err := audit.Verify(b.ctx, b.pool)
	require.NoError(t, err)
	assert.True(t, report.Intact, "a consistent rewrite is invisible to the chain alone")
	report, err = audit.Verify(b.ctx, b.pool, anchor)
	require.NoError(t, err)
	assert.False(t, report.Intact)
	assert.Equal(t, anchor.ID, report.BrokenAt)
	report, err = audit.Verify(b.ctx, b.pool, audit.Anchor{ID: 4242, Hash: anchor.Hash})
	require.NoError(t, err)
	assert.Equal(t, int64(4242), report.BrokenAt)
	assert.Contains(t, report.Problem, "not in the log")

	for _, s := range []string{"", "3", "3:", "x:sha256:" + strings.Repeat("0", 64), "0:sha256:" + strings.Repeat("0", 64), "3:sha256:abc"} {
		_, err := audit.ParseAnchor(s)
		assert.Error(t, err, s)
	}
}

func TestList(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	for i, e := range []audit.Entry{
		{Actor: "alice", Action: "resolve.run", Target: "quarantine:1"},
		{Actor: "bob", Action: "quarantine.export", Target: "quarantine:1"},
		{Actor: "alice", Action: "reconcile.run"},
		{Actor: "bob", Action: "resolve.start", Target: "quarantine:2"},
		{Actor: "carol", Action: "intake.run"},
	} {
		e.Details = map[string]int{"n": i}
		_, err := audit.Append(b.ctx, b.pool, e)
		require.NoError(t, err)
	}
	ids := func(f audit.Filter) []int64 {
		t.Helper()
		rows, err := audit.List(b.ctx, b.pool, f)
		require.NoError(t, err)
		out := []int64{}
		for _, r := range rows {
			out = append(out, r.ID-b.base)
		}
		return out
	}
	assert.Equal(t, []int64{5, 4, 3, 2, 1}, ids(audit.Filter{Limit: 5}), "newest first")
	assert.Equal(t, []int64{4, 1}, ids(audit.Filter{Action: "resolve"}), "a namespace")
	assert.Equal(t, []int64{}, ids(audit.Filter{Action: "re"}), "not a prefix")
	assert.Equal(t, []int64{1}, ids(audit.Filter{Action: "resolve.run"}))
	assert.Equal(t, []int64{3, 1}, ids(audit.Filter{Actor: "alice"}))
	assert.Equal(t, []int64{2, 1}, ids(audit.Filter{Target: "quarantine:1"}))
	assert.Equal(t, []int64{5, 4}, ids(audit.Filter{Limit: 2}))
	assert.Equal(t, []int64{3, 2}, ids(audit.Filter{Limit: 2, Before: b.base + 4}))
	// The rows before base come from the template database, which may be
	// older than an hour: only this test's rows are compared by time.
	ours := func(in []int64) []int64 {
		out := []int64{}
		for _, id := range in {
			if id > 0 {
				out = append(out, id)
			}
		}
		return out
	}
	assert.Equal(t, []int64{}, ours(ids(audit.Filter{Since: time.Now().Add(time.Hour)})))
	assert.Equal(t, []int64{}, ours(ids(audit.Filter{Until: time.Now().Add(-time.Hour)})))
	assert.Equal(t, []int64{5, 4, 3, 2, 1}, ours(ids(audit.Filter{Since: time.Now().Add(-time.Hour), Until: time.Now().Add(time.Hour)})))

	for _, f := range []audit.Filter{{Limit: -1}, {Limit: audit.MaxLimit + 1}, {Before: -3}} {
		_, err := audit.List(b.ctx, b.pool, f)
		assert.ErrorIs(t, err, audit.ErrInvalidFilter, "%+v", f)
	}
}

// appendingTx is the transaction Verify opens, with an operator's row
// appended (and committed) before every statement after the first: work
// that goes on while an auditor's verify reads.
type appendingTx struct {
	pgx.Tx
	t     *testing.T
	b     bundle
	reads int
}

func (a *appendingTx) between() {
	if a.reads++; a.reads > 1 {
		a.b.appendN(a.t, 1)
	}
}

func (a *appendingTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	a.between()
	return a.Tx.Query(ctx, sql, args...)
}

func (a *appendingTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	a.between()
	return a.Tx.QueryRow(ctx, sql, args...)
}

// appendingPool opens appendingTx transactions.
type appendingPool struct {
	*pgxpool.Pool
	t     *testing.T
	b     bundle
	opts  pgx.TxOptions
	began int
}

func (p *appendingPool) BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	tx, err := p.Pool.BeginTx(ctx, opts)
	p.opts, p.began = opts, p.began+1
	return &appendingTx{Tx: tx, t: p.t, b: p.b}, err
}

// Verify reads the chain, the head and (with a kept anchor) the log's end
// in one snapshot: rows committed between its statements are neither a row
// missing from the end nor a row added behind the log's back.
func TestVerifyReadsOneSnapshotUnderConcurrentAppends(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)
	b.appendN(t, 3)
	auditor := dbtest.PoolAs(t, b.dsn, dbtest.Auditor, 2)
	p := &appendingPool{Pool: auditor, t: t, b: b}
	r, err := audit.Verify(b.ctx, p)
	require.NoError(t, err)
	assert.True(t, r.Intact, "%s", r.Problem)
	assert.Equal(t, b.base+3, r.LastID, "the rows of its snapshot")
	assert.Equal(t, 1, p.began)
	assert.Equal(t, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, p.opts)

	kept := &audit.KeptAnchor{ID: r.LastID, Hash: r.LastHash, VerifiedAt: time.Now()}
	r, err = audit.VerifyKept(b.ctx, p, kept)
	require.NoError(t, err)
	assert.True(t, r.Intact, "with a kept anchor: %s", r.Problem)
	assert.Equal(t, 2, p.began)

	r, err = audit.Verify(b.ctx, auditor)
	require.NoError(t, err)
	assert.True(t, r.Intact, "%s", r.Problem)
	assert.Equal(t, b.base+6, r.LastID, "rows were appended between the reads (one in the first verify, two in the second)")
}
