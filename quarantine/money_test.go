package quarantine_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/governance"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/quarantine"
)

// A single accept-as-new of a money class runs the payload again (a second
// charge): it is refused as a decision of one person and becomes a plan of
// one record that another person approves; the same person through a second
// login is refused.
func TestAcceptAsNewOfAMoneyClassNeedsASecondPerson(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)
	bob := dbtest.PoolAs(t, b.dsn, dbtest.Operator2, 2)
	alice2 := dbtest.PoolAs(t, b.dsn, dbtest.Unmapped, 2)
	require.NoError(t, dbtest.Owner(b.dsn, "SELECT idem.person_add('alice', 'idemctl_test_unmapped')"))
	_, qid := b.conflict(t, "t1", "ch-1", transferPayload(500), transferPayload(650))
	_, err := governance.SetMoney(b.ctx, b.pool, "demo.transfer", &governance.Money{Amount: "/amount", Currency: "/currency", Unit: "minor"}, "alice", "")
	require.NoError(t, err)
	postings := func() int64 {
		var n int64
		require.NoError(t, b.pool.QueryRow(b.ctx, "SELECT count(*) FROM demo.posting").Scan(&n))
		return n
	}
	posted := postings()

	_, err = quarantine.AcceptAsNew(b.ctx, b.pool, qid, "ch-1-rev2", "alice", "corrected amount")
	require.ErrorIs(t, err, quarantine.ErrNeedsSecondPerson)
	assert.Equal(t, posted, postings(), "nothing ran")
	plan, err := quarantine.PlanAcceptOne(b.ctx, b.pool, qid, "ch-1-rev2", "alice", "corrected amount")
	require.NoError(t, err)
	assert.Equal(t, []int64{qid}, plan.IDs)
	assert.Equal(t, "ch-1-rev2", plan.Rule)
	for name, pool := range map[string]idem.DBTX{"alice": b.pool, "alice's second login": alice2} {
		_, err = quarantine.ApproveAccept(b.ctx, pool, plan.ID, "bob")
		assert.ErrorIs(t, err, quarantine.ErrSamePerson, name)
	}
	_, err = quarantine.RunAccept(b.ctx, b.pool, plan.ID, "alice", 10, nil)
	assert.ErrorIs(t, err, quarantine.ErrPlanState, "nothing runs before the approval")
	_, err = quarantine.ApproveAccept(b.ctx, bob, plan.ID, "bob")
	require.NoError(t, err)
	res, err := quarantine.RunAccept(b.ctx, b.pool, plan.ID, "alice", 10, nil)
	require.NoError(t, err)
	assert.EqualValues(t, 1, res.Decided)
	assert.Equal(t, posted+1, postings(), "ran once, under the named new operation")
	var op string
	require.NoError(t, b.pool.QueryRow(b.ctx, "SELECT new_operation_id FROM idem.quarantine WHERE id = $1", qid).Scan(&op))
	assert.Equal(t, "ch-1-rev2", op)
	// A plan of several records still needs the {operation_id} rule.
	_, q2 := b.conflict(t, "t1", "ch-2", transferPayload(10), transferPayload(11))
	_, q3 := b.conflict(t, "t1", "ch-3", transferPayload(10), transferPayload(12))
	_, err = b.pool.Exec(b.ctx, "SELECT idem.quarantine_bulk_accept_plan($1, 'fixed-id', 5, 'alice', 'x', '{}')", []int64{q2, q3})
	assert.Error(t, err)
}
