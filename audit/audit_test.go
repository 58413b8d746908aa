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
	pool *pgxpool.Pool
}

func setup(t *testing.T, maxConns int32) bundle {
	t.Helper()
	pool, _ := dbtest.NewPool(t, maxConns)
	return bundle{ctx: context.Background(), pool: pool}
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
			Actor: "alice", Action: "test.step", Target: fmt.Sprintf("thing:%d", i),
			Details: map[string]any{"i": i, "note": "ünïcode \"quoted\""},
		})
		require.NoError(t, err)
		out = append(out, rec)
	}
	return out
}

// tamper runs sql as a superuser with the log's triggers disabled, the way
// someone working behind the log's back would.
func (b bundle) tamper(t *testing.T, sql string, args ...any) {
	t.Helper()
	tx, err := b.pool.Begin(b.ctx)
	require.NoError(t, err)
	defer tx.Rollback(b.ctx)
	_, err = tx.Exec(b.ctx, "SET LOCAL session_replication_role = replica")
	require.NoError(t, err)
	_, err = tx.Exec(b.ctx, sql, args...)
	require.NoError(t, err, sql)
	require.NoError(t, tx.Commit(b.ctx))
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
	assert.True(t, report.Intact, "an empty log is intact")
	assert.Equal(t, int64(0), report.Rows)

	rows := b.appendN(t, 3)
	for i, r := range rows {
		assert.Equal(t, int64(i+1), r.ID)
		assert.Equal(t, "alice", r.Actor)
		assert.Equal(t, "postgres", r.DBUser)
		assert.Equal(t, "test.step", r.Action)
		assert.Regexp(t, `^sha256:[0-9a-f]{64}$`, r.Hash)
		assert.False(t, r.At.IsZero())
		if i == 0 {
			assert.Equal(t, "sha256:"+strings.Repeat("0", 64), r.PrevHash)
		} else {
			assert.Equal(t, rows[i-1].Hash, r.PrevHash)
		}
	}
	assert.JSONEq(t, `{"i": 0, "note": "ünïcode \"quoted\""}`, string(rows[0].Details))

	// A rolled-back append leaves no hole: the next row takes the next number.
	tx, err := b.pool.Begin(b.ctx)
	require.NoError(t, err)
	_, err = audit.Append(b.ctx, tx, audit.Entry{Actor: "bob", Action: "test.rolled_back"})
	require.NoError(t, err)
	require.NoError(t, tx.Rollback(b.ctx))
	next, err := audit.Append(b.ctx, b.pool, audit.Entry{Actor: "bob", Action: "test.after"})
	require.NoError(t, err)
	assert.Equal(t, int64(4), next.ID)
	assert.Equal(t, rows[2].Hash, next.PrevHash)
	assert.JSONEq(t, `{}`, string(next.Details))

	// A plain INSERT, whatever it claims, is chained by the database.
	_, err = b.pool.Exec(b.ctx, `INSERT INTO idem.audit (id, at, actor, db_user, action, details, prev_hash, hash)
		VALUES (99, '2000-01-01', 'carol', 'forged', 'test.sql', '{}', 'x', 'y')`)
	require.NoError(t, err)
	list, err := audit.List(b.ctx, b.pool, audit.Filter{Limit: 1})
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, int64(5), list[0].ID)
	assert.Equal(t, "postgres", list[0].DBUser)
	assert.Equal(t, next.Hash, list[0].PrevHash)

	report, err = audit.Verify(b.ctx, b.pool, audit.Anchor{ID: 2, Hash: rows[1].Hash})
	require.NoError(t, err)
	assert.True(t, report.Intact, report.Problem)
	assert.NoError(t, report.Err())
	assert.Equal(t, int64(5), report.Rows)
	assert.Equal(t, int64(5), report.HeadID)
	assert.Equal(t, list[0].Hash, report.HeadHash)
}

func TestAppendOnly(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	rows := b.appendN(t, 2)
	tests := []struct{ sql, code string }{
		{"UPDATE idem.audit SET actor = 'mallory'", "IX110"},
		{"UPDATE idem.audit SET details = '{}' WHERE id = 1", "IX110"},
		{"DELETE FROM idem.audit WHERE id = 2", "IX110"},
		{"TRUNCATE idem.audit", "IX110"},
		{"UPDATE idem.audit_head SET last_id = 1", "IX112"},
		{"DELETE FROM idem.audit_head", "IX112"},
		{"TRUNCATE idem.audit_head", "IX112"},
	}
	for _, tc := range tests {
		_, err := b.pool.Exec(b.ctx, tc.sql)
		assert.Equal(t, tc.code, pgCode(err), "%s: %v", tc.sql, err)
	}
	list, err := audit.List(b.ctx, b.pool, audit.Filter{})
	require.NoError(t, err)
	require.Len(t, list, 2)
	assert.Equal(t, rows[1], list[0])
	assert.Equal(t, rows[0], list[1])
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
	}
	for _, tc := range tests {
		_, err := audit.Append(b.ctx, b.pool, tc.e)
		assert.ErrorIs(t, err, audit.ErrInvalidEntry, tc.name)
	}
	assert.Zero(t, b.count(t, "SELECT count(*) FROM idem.audit"))
	assert.Equal(t, 0, b.count(t, "SELECT last_id FROM idem.audit_head"))

	// The database refuses them too, for writers that bypass this package.
	for _, sql := range []string{
		"INSERT INTO idem.audit (actor, action) VALUES ('', 'test.x')",
		"INSERT INTO idem.audit (actor, action) VALUES ('alice', 'NOT VALID')",
		"INSERT INTO idem.audit (actor, action, details) VALUES ('alice', 'test.x', '[1]')",
	} {
		_, err := b.pool.Exec(b.ctx, sql)
		assert.Equal(t, "IX111", pgCode(err), sql)
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
						Actor: fmt.Sprintf("writer-%d", w), Action: "test.concurrent", Details: map[string]int{"i": i},
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
	assert.Equal(t, writers*each, b.count(t, "SELECT count(*) FROM idem.audit"))
	assert.Equal(t, writers*each, b.count(t, "SELECT count(DISTINCT prev_hash) FROM idem.audit"), "no fork")
	assert.Equal(t, writers*each, b.count(t, "SELECT max(id) FROM idem.audit"), "no gap")
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
	_, err = audit.Append(b.ctx, slow, audit.Entry{Actor: "slow", Action: "test.slow"})
	assert.Equal(t, "40001", pgCode(err), "%v", err)
	report, err := audit.Verify(b.ctx, b.pool)
	require.NoError(t, err)
	assert.True(t, report.Intact, report.Problem)
}

func TestVerifyFindsTampering(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		tamper  string
		at      int64
		problem string
	}{
		{"row modified", "UPDATE idem.audit SET details = '{\"i\": 99}' WHERE id = 3",
			3, "its content does not match its hash: the row was modified"},
		{"actor modified", "UPDATE idem.audit SET actor = 'mallory' WHERE id = 5",
			5, "the row was modified"},
		{"row modified and rehashed", `UPDATE idem.audit SET actor = 'mallory',
			hash = idem.audit_row_hash(id, at, 'mallory', db_user, action, target, details, prev_hash) WHERE id = 3`,
			4, "its prev_hash is not the hash of row 3"},
		{"middle row deleted", "DELETE FROM idem.audit WHERE id = 3",
			3, "row 3 is missing (deleted): row 4 follows row 2"},
		{"two rows deleted", "DELETE FROM idem.audit WHERE id IN (2, 3)",
			2, "rows 2-3 are missing (deleted)"},
		{"first row deleted", "DELETE FROM idem.audit WHERE id = 1",
			1, "row 1 is missing"},
		{"last row deleted", "DELETE FROM idem.audit WHERE id = 5",
			5, "row 5 is missing (deleted from the end of the log)"},
		{"whole log deleted", "DELETE FROM idem.audit",
			1, "rows 1-5 are missing"},
		{"row inserted with made-up hashes", `INSERT INTO idem.audit VALUES
			(6, now(), 'mallory', 'postgres', 'test.step', NULL, '{}', 'sha256:` + strings.Repeat("1", 64) + `', 'sha256:` + strings.Repeat("2", 64) + `')`,
			6, "its prev_hash is not the hash of row 5"},
		{"row inserted with a correct chain but the head unmoved", `INSERT INTO idem.audit
			SELECT 6, now(), 'mallory', 'postgres', 'test.step', NULL, '{}', h.last_hash,
			       idem.audit_row_hash(6, now(), 'mallory', 'postgres', 'test.step', NULL, '{}', h.last_hash)
			FROM idem.audit_head h`,
			6, "row 6 was added behind the log's back"},
		{"row replaced by one rehashed", `UPDATE idem.audit SET id = 7 WHERE id = 3`,
			3, "row 3 is missing"},
		{"head deleted", "DELETE FROM idem.audit_head",
			6, "the chain's head (idem.audit_head) is missing"},
		{"head rolled back", "UPDATE idem.audit_head SET last_id = 4",
			5, "row 5 was added behind the log's back"},
		{"last row rewritten with head", `UPDATE idem.audit SET actor = 'mallory',
			hash = idem.audit_row_hash(id, at, 'mallory', db_user, action, target, details, prev_hash) WHERE id = 5`,
			5, "its hash differs from the one the head recorded"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, 2)
			b.appendN(t, 5)
			report, err := audit.Verify(b.ctx, b.pool)
			require.NoError(t, err)
			require.True(t, report.Intact, report.Problem)

			b.tamper(t, tc.tamper)
			report, err = audit.Verify(b.ctx, b.pool)
			require.NoError(t, err)
			assert.False(t, report.Intact)
			assert.Equal(t, tc.at, report.BrokenAt, report.Problem)
			assert.Contains(t, report.Problem, tc.problem)
			assert.ErrorIs(t, report.Err(), audit.ErrChainBroken)
			assert.ErrorContains(t, report.Err(), fmt.Sprintf("audit chain broken at row %d: ", tc.at))
		})
	}
}

// Someone with full control can rewrite the chain from some row on, hashes and
// head included; only a hash recorded elsewhere (an anchor) reveals it.
func TestVerifyAnchorRevealsAFullRewrite(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	rows := b.appendN(t, 5)
	anchor := audit.Anchor{ID: 3, Hash: rows[2].Hash}
	parsed, err := audit.ParseAnchor(anchor.String())
	require.NoError(t, err)
	require.Equal(t, anchor, parsed)

	tx, err := b.pool.Begin(b.ctx)
	require.NoError(t, err)
	_, err = tx.Exec(b.ctx, "SET LOCAL session_replication_role = replica")
	require.NoError(t, err)
	for id := 3; id <= 5; id++ {
		_, err = tx.Exec(b.ctx, `UPDATE idem.audit a SET actor = 'mallory',
			prev_hash = (SELECT hash FROM idem.audit WHERE id = a.id - 1),
			hash = idem.audit_row_hash(a.id, a.at, 'mallory', a.db_user, a.action, a.target, a.details,
			                           (SELECT hash FROM idem.audit WHERE id = a.id - 1))
			WHERE id = $1`, id)
		require.NoError(t, err)
	}
	_, err = tx.Exec(b.ctx, "UPDATE idem.audit_head SET last_hash = (SELECT hash FROM idem.audit WHERE id = 5)")
	require.NoError(t, err)
	require.NoError(t, tx.Commit(b.ctx))

	report, err := audit.Verify(b.ctx, b.pool)
	require.NoError(t, err)
	assert.True(t, report.Intact, "a consistent rewrite is invisible to the chain alone")
	report, err = audit.Verify(b.ctx, b.pool, anchor)
	require.NoError(t, err)
	assert.False(t, report.Intact)
	assert.Equal(t, int64(3), report.BrokenAt)
	report, err = audit.Verify(b.ctx, b.pool, audit.Anchor{ID: 42, Hash: anchor.Hash})
	require.NoError(t, err)
	assert.Equal(t, int64(42), report.BrokenAt)
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
		{Actor: "alice", Action: "quarantine.reject", Target: "quarantine:1"},
		{Actor: "bob", Action: "quarantine.export", Target: "quarantine:1"},
		{Actor: "alice", Action: "resolve.run"},
		{Actor: "bob", Action: "quarantine.reject", Target: "quarantine:2"},
		{Actor: "carol", Action: "quarantines.other"},
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
			out = append(out, r.ID)
		}
		return out
	}
	assert.Equal(t, []int64{5, 4, 3, 2, 1}, ids(audit.Filter{}), "newest first")
	assert.Equal(t, []int64{4, 2, 1}, ids(audit.Filter{Action: "quarantine"}), "a namespace, not a prefix")
	assert.Equal(t, []int64{4, 1}, ids(audit.Filter{Action: "quarantine.reject"}))
	assert.Equal(t, []int64{3, 1}, ids(audit.Filter{Actor: "alice"}))
	assert.Equal(t, []int64{2, 1}, ids(audit.Filter{Target: "quarantine:1"}))
	assert.Equal(t, []int64{5, 4}, ids(audit.Filter{Limit: 2}))
	assert.Equal(t, []int64{3, 2}, ids(audit.Filter{Limit: 2, Before: 4}))
	assert.Equal(t, []int64{}, ids(audit.Filter{Since: time.Now().Add(time.Hour)}))
	assert.Equal(t, []int64{}, ids(audit.Filter{Until: time.Now().Add(-time.Hour)}))
	assert.Len(t, ids(audit.Filter{Since: time.Now().Add(-time.Hour), Until: time.Now().Add(time.Hour)}), 5)

	for _, f := range []audit.Filter{{Limit: -1}, {Limit: audit.MaxLimit + 1}, {Before: -3}} {
		_, err := audit.List(b.ctx, b.pool, f)
		assert.ErrorIs(t, err, audit.ErrInvalidFilter, "%+v", f)
	}
}
