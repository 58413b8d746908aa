package attack_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/dbtest"
)

// Four eyes: the one internal step that stamps an approval is granted to
// nobody; no user stamps a plan through it.
func TestFourEyesStepIsInternal(t *testing.T) {
	t.Parallel()
	w := setup(t)
	before := w.snapshot()
	forge := `SELECT idem.four_eyes_approve('idem.horizon_plan', '{"id":1,"state":"planned","planned_person":"x"}',
		'purge plan', 'alice', 'horizon.approve', '{}', ARRAY['IX302', 'IX303'])`
	for name, pool := range map[string]*pgxpool.Pool{"app": w.app, "operator": w.operator, "auditor": w.auditor} {
		_, err := pool.Exec(w.ctx, forge)
		assert.Equal(t, "42501", code(err), name)
	}
	assert.Equal(t, before, w.snapshot())
}

// Identities that enter without their effect: no app login and no single
// operator can create one. A service cannot plan, approve or run an entry
// plan, nor write an identity or its marker; an operator cannot approve their
// own plan (through any login of theirs), run it unapproved, approve it by
// hand, or write an identity directly.
func TestNoSingleUserEntersAnIdentityWithoutItsEffect(t *testing.T) {
	t.Parallel()
	w := setup(t)
	payload := `{"amount":5,"currency":"EUR","from":"a","to":"b"}`
	items := fmt.Sprintf(`[{"tenant_id":"t1","operation_id":"forged-1","class":%q,"payload":%q,"payload_hash":%q,"response":{"ok":true},"evidence":"x"}]`,
		projClass, payload, hashOf(payload))
	digest := "sha256:" + strings.Repeat("0", 64)
	create := "SELECT (idem.entry_plan_create('record', 'file', $1, $2::jsonb, 'x', 'because', NULL, NULL)).id"
	_, err := w.app.Exec(w.ctx, create, digest, items)
	assert.Equal(t, "42501", code(err), "a service plans nothing")
	unmapped := dbtest.PoolAs(t, w.dsn, dbtest.Unmapped, 2)
	_, err = unmapped.Exec(w.ctx, create, digest, items)
	assert.Equal(t, "IX313", code(err), "a login without a person plans nothing")
	for _, sql := range []string{
		"INSERT INTO idem.identity (tenant_id, operation_id, op_class, payload_digest, entry_plan) VALUES ('t1', 'forged-2', 'proj.view', decode(repeat('00', 32), 'hex'), 1)",
		"INSERT INTO idem.entry_plan (kind, source, source_digest, items, counts, sample, reason, planned_by, planned_person, planned_db_user, state, approved_person, approved_at) VALUES ('record', 'f', '" + digest + "', 1, '{}', '[]', 'r', 'a', 'alice', 'a', 'approved', 'bob', now())",
	} {
		_, err = w.app.Exec(w.ctx, sql)
		assert.Equal(t, "42501", code(err), "app: %s", sql)
		_, err = w.operator.Exec(w.ctx, sql)
		assert.Equal(t, "42501", code(err), "operator: %s", sql)
	}

	var id int64
	require.NoError(t, w.operator.QueryRow(w.ctx, create, digest, items).Scan(&id))
	require.NoError(t, dbtest.Owner(w.dsn, "SELECT idem.person_add('alice', 'idemctl_test_unmapped')"))
	before := w.snapshot()
	_, err = w.operator.Exec(w.ctx, "SELECT idem.entry_plan_run($1, 'alice')", id)
	assert.Equal(t, "IX341", code(err), "not approved: nothing enters")
	_, err = w.operator.Exec(w.ctx, "SELECT idem.entry_plan_approve($1, 'bob')", id)
	assert.Equal(t, "IX342", code(err), "alice approves nothing of hers, whatever the label")
	_, err = unmapped.Exec(w.ctx, "SELECT idem.entry_plan_approve($1, 'carol')", id)
	assert.Equal(t, "IX342", code(err), "nor through a second login")
	_, err = w.operator.Exec(w.ctx, "UPDATE idem.entry_plan SET state = 'approved', approved_person = 'bob', approved_at = now()")
	assert.Equal(t, "42501", code(err), "nor by hand")
	for _, pool := range []*pgxpool.Pool{w.app, w.auditor} {
		_, err = pool.Exec(w.ctx, "SELECT idem.entry_plan_approve($1, 'bob')", id)
		assert.Equal(t, "42501", code(err))
		_, err = pool.Exec(w.ctx, "SELECT idem.entry_plan_run($1, 'bob')", id)
		assert.Equal(t, "42501", code(err))
	}
	_, err = w.operator.Exec(w.ctx, "SELECT idem.entry_plan_lock($1)", id)
	assert.Equal(t, "42501", code(err), "the internal lock is granted to nobody")
	assert.Equal(t, before, w.snapshot(), "nothing entered, nothing written")
	var n int
	require.NoError(t, w.operator.QueryRow(w.ctx, "SELECT count(*) FROM idem.identity WHERE entry_plan IS NOT NULL").Scan(&n))
	assert.Zero(t, n)

	// Two persons: then it enters.
	_, err = w.second.Exec(w.ctx, "SELECT idem.entry_plan_approve($1, 'bob')", id)
	require.NoError(t, err)
	_, err = w.operator.Exec(w.ctx, "SELECT idem.entry_plan_run($1, 'alice')", id)
	require.NoError(t, err)
	require.NoError(t, w.operator.QueryRow(w.ctx, "SELECT count(*) FROM idem.identity WHERE entry_plan = $1", id).Scan(&n))
	assert.Equal(t, 1, n)
}

// A pending manual correction pins its identity out of every purge: marking
// it done takes the pin out of the proofs made afterwards. A login mapped to
// no person cannot, and one person alone only plans it: it stays pending
// until another person approves (idem.horizon_correction_done, a governed
// change of kind correction_done).
func TestMarkingACorrectionDoneNeedsTwoPersons(t *testing.T) {
	t.Parallel()
	w := setup(t)
	var id int64
	require.NoError(t, w.operator.QueryRow(w.ctx,
		"SELECT id FROM idem.horizon_correction_add('t1', 'refund-9', 'refund REF-9 to replay by hand', 'alice')").Scan(&id))
	pending := func() bool {
		var p bool
		require.NoError(t, w.operator.QueryRow(w.ctx, "SELECT done_at IS NULL FROM idem.horizon_correction WHERE id = $1", id).Scan(&p))
		return p
	}
	done := "SELECT (idem.horizon_correction_done($1, $2)).id"

	unmapped := dbtest.PoolAs(t, w.dsn, dbtest.Unmapped, 1)
	before := w.snapshot()
	_, err := unmapped.Exec(w.ctx, done, id, "nobody")
	assert.Equal(t, "IX313", code(err), "a login with no person")
	_, err = w.app.Exec(w.ctx, done, id, "svc")
	assert.Equal(t, "42501", code(err), "a service")
	_, err = w.auditor.Exec(w.ctx, done, id, "audit")
	assert.Equal(t, "42501", code(err), "an auditor")
	assert.Equal(t, before, w.snapshot(), "nothing written")

	var change int64
	require.NoError(t, w.operator.QueryRow(w.ctx, done, id, "alice").Scan(&change))
	assert.True(t, pending(), "one person alone only plans it: the correction still pins")
	for _, label := range []string{"alice", "bob"} {
		_, err = w.operator.Exec(w.ctx, "SELECT idem.governed_change_approve($1, $2)", change, label)
		assert.Equal(t, "IX332", code(err), "the planner's person approves nothing, whatever label (%s)", label)
	}
	_, err = unmapped.Exec(w.ctx, "SELECT idem.governed_change_approve($1, 'nobody')", change)
	assert.Equal(t, "IX313", code(err))
	assert.True(t, pending())
	_, err = w.second.Exec(w.ctx, "SELECT idem.governed_change_approve($1, 'bob')", change)
	require.NoError(t, err)
	assert.False(t, pending(), "another person's approval marks it done")
}

// A class's min-age is the floor below which nothing is ever purged, whatever
// the plan's --before says: lowering it (or removing it) lets a purge reach
// identities the floor protected, a weakening like making a forever class
// horizon. A login mapped to no person cannot, and one person alone only
// plans it (idem.class_set, a governed change of kind class_min_age): the
// floor stays until another person approves. Raising it stays one person's
// act, applied at once.
func TestLoweringAMinAgeNeedsTwoPersons(t *testing.T) {
	t.Parallel()
	w := setup(t)
	minAge := func() string { // in days, the way class_set was given them
		var s string
		require.NoError(t, w.operator.QueryRow(w.ctx, `SELECT coalesce((extract(epoch FROM min_age) / 86400)::int || ' days', 'none')
			FROM idem.op_class WHERE name = $1`, projClass).Scan(&s))
		return s
	}
	set := "SELECT applied, change_id FROM idem.class_set($1, 'horizon', $2::interval, true, $3, $4)"
	var applied bool
	var change *int64
	require.NoError(t, w.operator.QueryRow(w.ctx, set, projClass, "30 days", "alice", nil).Scan(&applied, &change))
	assert.True(t, applied, "raising the floor is one person's act")
	assert.Equal(t, "30 days", minAge())

	unmapped := dbtest.PoolAs(t, w.dsn, dbtest.Unmapped, 1)
	before := w.snapshot()
	for _, lower := range []*string{ptr("1 day"), ptr("0"), nil} {
		_, err := unmapped.Exec(w.ctx, set, projClass, lower, "nobody", "the floor is too cautious")
		assert.Equal(t, "IX313", code(err), "a login with no person lowers nothing (%v)", lower)
		_, err = w.operator.Exec(w.ctx, set, projClass, lower, "alice", nil)
		assert.Equal(t, "IX306", code(err), "lowering it needs a reason (%v)", lower)
	}
	for name, pool := range map[string]*pgxpool.Pool{"app": w.app, "auditor": w.auditor} {
		_, err := pool.Exec(w.ctx, set, projClass, "1 day", "x", "because")
		assert.Equal(t, "42501", code(err), name)
	}
	assert.Equal(t, before, w.snapshot(), "nothing written")
	assert.Equal(t, "30 days", minAge())

	require.NoError(t, w.operator.QueryRow(w.ctx, set, projClass, "1 day", "alice", "the floor is too cautious").Scan(&applied, &change))
	assert.False(t, applied, "one person alone only plans it")
	require.NotNil(t, change)
	assert.Equal(t, "30 days", minAge(), "the floor stays until another person approves")
	var kind string
	require.NoError(t, w.operator.QueryRow(w.ctx, "SELECT kind FROM idem.governed_change WHERE id = $1", *change).Scan(&kind))
	assert.Equal(t, "class_min_age", kind)
	for _, label := range []string{"alice", "bob"} {
		_, err := w.operator.Exec(w.ctx, "SELECT idem.governed_change_approve($1, $2)", *change, label)
		assert.Equal(t, "IX332", code(err), "the planner's person approves nothing, whatever label (%s)", label)
	}
	_, err := unmapped.Exec(w.ctx, "SELECT idem.governed_change_approve($1, 'nobody')", *change)
	assert.Equal(t, "IX313", code(err))
	assert.Equal(t, "30 days", minAge())

	// Raised meanwhile by one person: the planned lowering no longer says
	// what the approver would apply.
	require.NoError(t, w.operator.QueryRow(w.ctx, set, projClass, "40 days", "alice", nil).Scan(&applied, &change))
	var stale int64
	require.NoError(t, w.operator.QueryRow(w.ctx, "SELECT max(id) FROM idem.governed_change WHERE kind = 'class_min_age'").Scan(&stale))
	_, err = w.second.Exec(w.ctx, "SELECT idem.governed_change_approve($1, 'bob')", stale)
	assert.Equal(t, "IX333", code(err), "the floor changed since it was planned")
	assert.Equal(t, "40 days", minAge())

	require.NoError(t, w.operator.QueryRow(w.ctx, set, projClass, "1 day", "alice", "the floor is too cautious").Scan(&applied, &change))
	_, err = w.second.Exec(w.ctx, "SELECT idem.governed_change_approve($1, 'bob')", *change)
	require.NoError(t, err)
	assert.Equal(t, "1 days", minAge(), "another person's approval lowers it")
	var audited int
	require.NoError(t, w.auditor.QueryRow(w.ctx, `SELECT count(*) FROM idem.audit WHERE action = 'horizon.class.set'
		AND target = 'class:' || $1 AND details::jsonb ->> 'change' = $2 AND details::jsonb ->> 'planned_person' = 'alice'`,
		projClass, fmt.Sprint(*change)).Scan(&audited))
	assert.Equal(t, 1, audited, "the audit row names the change and its planner")
}

func ptr(s string) *string { return &s }
