package attack_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// Finding (trust boundary, round two, 3): the purge runner's exclusion was a
// session advisory lock that any login could take: an operator login mapped
// to no person took it, ran the purge's batches and finished the purge (its
// audit row had no person), and holding it blocked every purge. The runner
// is now the session, login and person recorded with the plan: a lock held
// elsewhere neither blocks nor stands in for it, and a login with no person
// runs no batch.
func TestPurgeRunnerIsAPersonsSession(t *testing.T) {
	t.Parallel()
	w := setup(t)
	dbtest.Seed(t, w.dsn, projClass, "t1", "op-", 60, 3*24*time.Hour, time.Minute)
	var part string
	require.NoError(t, w.operator.QueryRow(w.ctx, `SELECT part::text FROM idem.inbox_body_partitions()
		WHERE NOT is_default AND upper_bound <= now() - interval '2 days' ORDER BY lower_bound DESC LIMIT 1`).Scan(&part))
	p, err := horizon.MakePlan(w.ctx, w.operator, horizon.PlanOptions{Class: projClass, Before: time.Now().Add(-24 * time.Hour),
		Operator: "alice", AcceptUnbounded: true})
	require.NoError(t, err)
	_, err = horizon.Approve(w.ctx, w.second, p.ID, "bob")
	require.NoError(t, err)

	// An operator login with no person holds the old runner's lock.
	hog, err := pgx.Connect(w.ctx, dbtest.As(w.dsn, dbtest.Unmapped))
	require.NoError(t, err)
	defer hog.Close(w.ctx)
	_, err = hog.Exec(w.ctx, "SELECT pg_advisory_lock(1768189296, $1::integer)", p.ID)
	require.NoError(t, err)

	// Alice begins the purge regardless, then her session ends.
	runner, err := pgx.Connect(w.ctx, dbtest.As(w.dsn, dbtest.Operator))
	require.NoError(t, err)
	_, err = runner.Exec(w.ctx, "SELECT idem.horizon_purge_begin($1, 'alice', '[]')", p.ID)
	require.NoError(t, err, "a lock another login holds does not block the purge")
	require.NoError(t, runner.Close(w.ctx))

	before := w.snapshot()
	for _, tc := range []struct{ sql, want string }{
		{fmt.Sprintf("SELECT idem.horizon_purge_begin(%d, 'mallory', '[]')", p.ID), "IX313"},
		{fmt.Sprintf("SELECT idem.horizon_purge_blocks(%d, '%s'::regclass, 0, 100000)", p.ID, part), "IX313"},
		{fmt.Sprintf("SELECT idem.horizon_drop_tombstones_blocks(%d, 0, 100000)", p.ID), "IX313"},
		{fmt.Sprintf("SELECT idem.horizon_purge_finish(%d, 'mallory', '{}')", p.ID), "IX313"},
	} {
		_, err := hog.Exec(w.ctx, tc.sql)
		assert.Equal(t, tc.want, code(err), "a login with no person: %s: %v", tc.sql, err)
	}
	// Bob, another person, is not the runner of a purge he did not begin.
	for _, sql := range []string{
		fmt.Sprintf("SELECT idem.horizon_purge_blocks(%d, '%s'::regclass, 0, 100000)", p.ID, part),
		fmt.Sprintf("SELECT idem.horizon_purge_finish(%d, 'bob', '{}')", p.ID),
	} {
		_, err := w.second.Exec(w.ctx, sql)
		assert.Equal(t, "IX310", code(err), "%s: %v", sql, err)
	}
	assert.Equal(t, before, w.snapshot(), "nothing was purged or recorded")

	// Alice resumes it (her old session is gone) and finishes it, as a person.
	res, err := horizon.Purge(w.ctx, w.operator, p.ID, horizon.PurgeOptions{Operator: "alice"})
	require.NoError(t, err)
	assert.Equal(t, "done", string(res.Plan.State))
	assert.Positive(t, res.Plan.Purged)
	var person, login string
	require.NoError(t, w.auditor.QueryRow(w.ctx, `SELECT person, db_user FROM idem.audit
		WHERE action = 'horizon.purge.finish' AND target = $1`, fmt.Sprintf("horizon_plan:%d", p.ID)).Scan(&person, &login))
	assert.Equal(t, dbtest.PersonOperator, person)
	assert.Equal(t, string(dbtest.Operator), login)
}

// Finding (trust boundary, round two, 6): idem.redrive_host_of read the
// wrong capture groups, so every IPv6 re-drive URL was refused, and
// idem.redrive_allow refused "::1" itself. An IPv6 host is allowed by the
// owner and then named by an operator's URL; another IPv6 host is not.
func TestRedriveIPv6Host(t *testing.T) {
	t.Parallel()
	w := setup(t)
	dbtest.RegisterAppClass(t, w.dsn, "pay.v6", "forever")
	require.NoError(t, dbtest.Owner(w.dsn, "SELECT idem.redrive_allow('::1')"))
	set := func(url string) error {
		_, err := w.operator.Exec(w.ctx, "SELECT idem.class_redrive_set('pay.v6', $1, false, 'alice')",
			fmt.Sprintf(`{"kind":"http","url":%q}`, url))
		return err
	}
	require.NoError(t, set("http://[::1]:8089/transfers"), "a loopback IPv6 URL on the allow-list")
	assert.Equal(t, "IX504", code(set("https://[2001:db8::1]/transfers")), "an IPv6 host not on the allow-list")
	err := set("https://[::1].evil.example/x")
	assert.Equal(t, "IX502", code(err), "not an IPv6 literal: %v", err)
}

// Finding (trust boundary, round two, 2): an app login claimed an identity
// of demo.transfer (a class with a SQL effect), completed it with a forged
// response and committed: a marker without its effect, answered
// already_applied ever after. claim refuses such a class (IX013), and so
// does complete, for a claim made before the class was given a SQL effect.
func TestClaimRefusesASQLEffectClass(t *testing.T) {
	t.Parallel()
	w := setup(t)
	payload := `{"amount":100,"currency":"EUR","from":"a","to":"b"}`
	before := w.snapshot()
	tx, err := w.app.Begin(w.ctx)
	require.NoError(t, err)
	_, err = tx.Exec(w.ctx, "SELECT * FROM idem.claim('t1', 'forged', 'demo.transfer', $1, $2)", payload, hashOf(payload))
	assert.Equal(t, "IX013", code(err), "%v", err)
	require.NoError(t, tx.Rollback(w.ctx))
	assert.Equal(t, before, w.snapshot(), "no marker was written")

	// A class given a SQL effect between the claim and the complete.
	dbtest.RegisterAppClass(t, w.dsn, "late.effect", "forever")
	tx, err = w.app.Begin(w.ctx)
	require.NoError(t, err)
	defer tx.Rollback(w.ctx)
	_, err = tx.Exec(w.ctx, "SELECT * FROM idem.claim('t1', 'late', 'late.effect', $1, $2)", payload, hashOf(payload))
	require.NoError(t, err)
	dbtest.RegisterEffect(t, w.dsn, "late.effect", "forever", "late_fx", "SELECT '{}'::jsonb")
	_, err = tx.Exec(w.ctx, `SELECT idem.complete('t1', 'late', '{"posting_id":"forged"}')`)
	assert.Equal(t, "IX013", code(err), "%v", err)
}
