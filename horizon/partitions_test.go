package horizon_test

import (
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// TestPartitionsAheadAreBounded: an operator may create partitions for the
// coming 31 days, not for days further ahead (each would be a table every
// plan carries); how far back is not bounded, and long-past days get a
// partition a month.
func TestPartitionsAheadAreBounded(t *testing.T) {
	t.Parallel()
	f := setup(t)
	before := f.count("SELECT count(*) FROM idem.inbox_body_partitions()")
	f.exec("SELECT idem.inbox_body_ensure(current_date + 31, current_date + 31)")
	for _, r := range []struct{ from, to int }{{32, 32}, {1, 32}, {400, 400}, {-10, 380}} {
		_, err := f.pool.Exec(f.ctx, "SELECT idem.inbox_body_ensure(current_date + $1::int, current_date + $2::int)", r.from, r.to)
		var pgErr *pgconn.PgError
		require.True(t, errors.As(err, &pgErr), "%+v: %v", r, err)
		assert.Equal(t, "22023", pgErr.Code, "%+v", r)
		assert.Contains(t, pgErr.Message, "more than 31 days ahead")
	}
	assert.Equal(t, before+1, f.count("SELECT count(*) FROM idem.inbox_body_partitions()"), "only day +31 was created")
	assert.Zero(t, f.count("SELECT count(*) FROM idem.inbox_body_partitions() WHERE lower_bound > now() + interval '32 days'"))

	// A year of history: day partitions for the last two months or so, a
	// partition a month before.
	made := f.count("SELECT idem.inbox_body_ensure(current_date - 400, current_date - 21)")
	assert.Less(t, made, int64(100), "%d partitions for 380 days", made)
	assert.Positive(t, f.count(`SELECT count(*) FROM idem.inbox_body_partitions()
		WHERE upper_bound - lower_bound >= interval '28 days' AND upper_bound <= now() - interval '60 days'`))
	assert.Zero(t, f.count(`SELECT count(*) FROM idem.inbox_body_partitions()
		WHERE upper_bound - lower_bound >= interval '28 days' AND upper_bound > now() - interval '60 days'`),
		"recent days keep day partitions, which a purge swaps one by one")
	assert.Zero(t, f.count(`SELECT count(*) FROM idem.inbox_body_partitions() a JOIN idem.inbox_body_partitions() b
		ON a.part <> b.part AND NOT a.is_default AND NOT b.is_default AND a.lower_bound < b.upper_bound AND b.lower_bound < a.upper_bound`))
}

// TestPurgeOnMonthPartitions: history old enough to get a partition a month
// is purged by swapping the whole month, keeps the rows of other classes,
// leaves tombstones that late replays are answered from, and the
// executor's direct body reader still finds bodies in a month, in a day, and
// in a partition created by hand after it was built.
func TestPurgeOnMonthPartitions(t *testing.T) {
	t.Parallel()
	f := setup(t)
	const day = 24 * time.Hour
	f.seed(projClass, "t1", "old-", 90, 150*day, 8*time.Hour)
	f.seed("demo.transfer", "t1", "money-", 10, 150*day, 3*day)
	f.seed(projClass, "t1", "new-", 20, 5*day, time.Hour)
	months := f.count(`SELECT count(*) FROM idem.inbox_body_partitions()
		WHERE upper_bound - lower_bound >= interval '28 days' AND lower_bound < now() - interval '120 days'`)
	assert.GreaterOrEqual(t, months, int64(2), "the old rows lie in month partitions")
	assert.Zero(t, f.count(`SELECT count(*) FROM idem.inbox_body_partitions()
		WHERE upper_bound - lower_bound = interval '1 day' AND upper_bound < now() - interval '110 days'`))

	// One day ahead created by hand, after the reader was generated: the
	// reader still finds its bodies, through the partitioned table.
	require.NoError(t, dbtest.Owner(f.dsn, `CREATE TABLE idem.inbox_body_byhand PARTITION OF idem.inbox_body
		FOR VALUES FROM ((current_date + 25)::timestamp AT TIME ZONE 'UTC') TO ((current_date + 26)::timestamp AT TIME ZONE 'UTC')`))
	dbtest.SeedUnpartitioned(t, f.dsn, projClass, "t1", "ahead-", 1, -25*day-time.Hour, time.Minute)
	assert.EqualValues(t, 1, f.count("SELECT count(*) FROM idem.inbox_body WHERE created_at >= current_date + 25"))
	res, ran, err := f.replay("t1", "ahead-1", `{"n":1}`)
	require.NoError(t, err)
	assert.Equal(t, idem.AlreadyApplied, res.Outcome)
	assert.False(t, ran)

	before := f.primaryNow().Add(-100 * day)
	p := f.planApproved(before)
	assert.EqualValues(t, 90, p.Candidates)
	r, err := horizon.Purge(f.ctx, f.bob, p.ID, horizon.PurgeOptions{Operator: "bob"})
	require.NoError(t, err)
	assert.Equal(t, horizon.StateDone, r.Plan.State)
	assert.EqualValues(t, 90, r.Plan.Purged)
	wholly := f.count(`SELECT count(*) FROM idem.inbox_body_partitions()
		WHERE upper_bound - lower_bound >= interval '28 days' AND upper_bound <= $1`, before)
	assert.Positive(t, wholly)
	assert.GreaterOrEqual(t, int64(r.Swaps), wholly, "each month wholly before the cutoff is swapped")
	assert.Positive(t, r.Batches, "the month the cutoff falls in goes by batches")
	assert.EqualValues(t, 90, f.count("SELECT count(*) FROM idem.tombstone WHERE purge_plan = $1", p.ID))
	assert.EqualValues(t, 10, f.count("SELECT count(*) FROM idem.inbox WHERE op_class = 'demo.transfer'"), "other classes are kept")

	for _, c := range []struct {
		op, payload string
		want        idem.Outcome
	}{
		{"old-7", `{"n":7}`, idem.Purged},
		{"new-7", `{"n":7}`, idem.AlreadyApplied},
		{"ahead-1", `{"n":1}`, idem.AlreadyApplied},
	} {
		res, ran, err := f.replay("t1", c.op, c.payload)
		require.NoError(t, err, c.op)
		assert.Equal(t, c.want, res.Outcome, c.op)
		assert.False(t, ran, c.op)
	}
	// A kept body in a swapped month, as the SQL executor answers it.
	var outcome, response string
	require.NoError(t, f.app.QueryRow(f.ctx, `SELECT outcome, response::text FROM idem.execute('t1', 'money-2', 'demo.transfer', '{"n":2}', $1)`,
		mustHash(t, `{"n":2}`)).Scan(&outcome, &response))
	assert.Equal(t, "already_applied", outcome)
	assert.JSONEq(t, `{"ok":true}`, response)
}
