package governance_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/governance"
	"github.com/idemctl/idemctl/idem"
)

func item(t *testing.T, tenant, op string, amount int) governance.EntryItem {
	t.Helper()
	canon, hash, err := idem.Canonicalize([]byte(fmt.Sprintf(`{"amount":%d,"currency":"EUR","from":"alice","to":"bob"}`, amount)), idem.PayloadLimits{})
	require.NoError(t, err)
	return governance.EntryItem{TenantID: tenant, OperationID: op, Class: "demo.transfer", Payload: string(canon),
		PayloadHash: hash, Response: []byte(`{"status":"charged","provider_ref":"ch_123"}`), Evidence: "psp ch_123"}
}

// An outcome known from outside is recorded by hand: one person plans,
// another approves, the run enters the identity with its response and does
// not run its effect; a later retry is already_applied, with no posting.
func TestRecordEntersWithoutTheEffect(t *testing.T) {
	t.Parallel()
	f := setup(t)
	_, err := governance.SetMoney(f.ctx, f.alice, "demo.transfer", charge, "alice", "")
	require.NoError(t, err)
	postings := func() int {
		var n int
		require.NoError(t, f.alice.QueryRow(f.ctx, "SELECT count(*) FROM demo.posting").Scan(&n))
		return n
	}
	posted := postings()
	items := []governance.EntryItem{item(t, "t1", "ext-1", 500), item(t, "t1", "ext-2", 700)}
	o := governance.EntryOptions{Kind: governance.EntryRecord, Source: "psp report", SourceDigest: governance.DigestOf([]byte("x")),
		Operator: "alice", Reason: "PSP charged, we never recorded (INC-9)"}
	_, err = governance.PlanEntry(f.ctx, f.alice, o, items)
	assert.ErrorIs(t, err, governance.ErrRefused, "a money class needs a contract")
	o.Contract = "CONTRACT-PSP-7"
	_, err = governance.PlanEntry(f.ctx, f.alice, o, items)
	assert.ErrorIs(t, err, governance.ErrRefused, "a SQL effect needs a manual correction reference")
	o.Correction = "ledger correction LC-12 by finance ops"
	p, err := governance.PlanEntry(f.ctx, f.alice, o, items)
	require.NoError(t, err)
	assert.Equal(t, 2, p.Items)
	assert.JSONEq(t, `{"items":2,"tenants":1,"classes":{"demo.transfer":2}}`, string(p.Counts))

	_, err = governance.RunEntry(f.ctx, f.alice, p.ID, "alice")
	assert.ErrorIs(t, err, governance.ErrState, "nothing enters before the approval")
	for name, pool := range map[string]idem.DBTX{"alice": f.alice, "alice's second login": f.alice2} {
		_, err = governance.ApproveEntry(f.ctx, pool, p.ID, "bob")
		assert.ErrorIs(t, err, governance.ErrSamePerson, name)
	}
	// Meanwhile the service executes ext-2 itself: it is left alone.
	res, err := idem.Execute(f.ctx, f.app, idem.Command{Identity: idem.Identity{TenantID: "t1", OperationID: "ext-2"},
		Class: "demo.transfer", Payload: []byte(items[1].Payload)})
	require.NoError(t, err)
	require.Equal(t, idem.Applied, res.Outcome)
	posted++
	_, err = governance.ApproveEntry(f.ctx, f.bob, p.ID, "bob")
	require.NoError(t, err)
	done, err := governance.RunEntry(f.ctx, f.alice, p.ID, "alice")
	require.NoError(t, err)
	assert.Equal(t, "done", done.State)
	assert.Equal(t, 1, done.Entered)
	assert.Equal(t, 1, done.LeftAlone)
	outcomes, err := governance.EntryOutcomes(f.ctx, f.alice, p.ID)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"t1/ext-1": "entered", "t1/ext-2": "exists"}, outcomes)
	assert.Equal(t, posted, postings(), "recording ran no effect")

	res, err = idem.Execute(f.ctx, f.app, idem.Command{Identity: idem.Identity{TenantID: "t1", OperationID: "ext-1"},
		Class: "demo.transfer", Payload: []byte(items[0].Payload)})
	require.NoError(t, err)
	assert.Equal(t, idem.AlreadyApplied, res.Outcome, "a later retry is not a second charge")
	assert.JSONEq(t, `{"status":"charged","provider_ref":"ch_123"}`, string(res.Response))
	assert.Equal(t, posted, postings(), "no posting written")
	var plan *int64
	require.NoError(t, f.alice.QueryRow(f.ctx, "SELECT entry_plan FROM idem.identity WHERE operation_id = 'ext-1'").Scan(&plan))
	require.NotNil(t, plan)
	assert.Equal(t, p.ID, *plan)
	_, err = governance.RunEntry(f.ctx, f.alice, p.ID, "alice")
	assert.ErrorIs(t, err, governance.ErrState, "once")
}
