package governance_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/governance"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/quarantine"
)

// Once, `record` of an identity the inbox holds with ANOTHER payload
// (the PSP charged 50.00 under ext-1, the inbox applied 41.00) ends as
// outcome "exists", counted "left alone", exactly as the same payload
// would: no quarantine record, no evidence of the conflict, and the
// approval's question counted it in what it "records" (EUR 51.00 over 2
// records; the run recorded EUR 1.00). docs/import.md quarantines the same
// case for an import ("quarantined with both sides"); BRIEF rule 6: same
// identity, different payload is a conflict, never a silent success.
func TestRecordOfAnIdentityHeldWithAnotherPayloadIsAConflict(t *testing.T) {
	t.Parallel()
	f := setup(t)
	held := item(t, "t1", "ext-1", 4100)
	res, err := idem.Execute(f.ctx, f.app, idem.Command{Identity: idem.Identity{TenantID: "t1", OperationID: "ext-1"},
		Class: "demo.transfer", Payload: []byte(held.Payload)})
	require.NoError(t, err)
	require.Equal(t, idem.Applied, res.Outcome)

	o := governance.EntryOptions{Kind: governance.EntryRecord, Source: "psp report", SourceDigest: governance.DigestOf([]byte("x")),
		Operator: "alice", Reason: "PSP charged", Correction: "LC-1"}
	p, err := governance.PlanEntry(f.ctx, f.alice, o, []governance.EntryItem{item(t, "t1", "ext-1", 5000)})
	require.NoError(t, err)
	_, err = governance.ApproveEntry(f.ctx, f.bob, p.ID, "bob")
	require.NoError(t, err)
	done, err := governance.RunEntry(f.ctx, f.alice, p.ID, "alice")
	require.NoError(t, err)
	outcomes, err := governance.EntryOutcomes(f.ctx, f.alice, p.ID)
	require.NoError(t, err)
	t.Logf("entered %d, left alone %d, outcomes %v", done.Entered, done.LeftAlone, outcomes)
	assert.NotEqual(t, "exists", outcomes["t1/ext-1"], "another payload is not the identity 'existing': it is a conflict")
	var q int
	require.NoError(t, f.alice.QueryRow(f.ctx, "SELECT count(*) FROM idem.quarantine WHERE tenant_id = 't1' AND operation_id = 'ext-1'").Scan(&q))
	assert.Equal(t, 1, q, "the conflicting outcome known from outside is quarantined with both sides, as an import's is")

	// That operation is done (the record says so): it never runs again as
	// new, and the record keeps its answer.
	var qid int64
	require.NoError(t, f.alice.QueryRow(f.ctx, "SELECT id FROM idem.quarantine WHERE tenant_id = 't1' AND operation_id = 'ext-1'").Scan(&qid))
	rec, err := quarantine.Show(f.ctx, f.alice, qid)
	require.NoError(t, err)
	require.NotNil(t, rec.Entered, "the record says how its incoming side came")
	assert.Equal(t, "record", rec.Entered.By)
	assert.Equal(t, p.ID, rec.Entered.EntryPlan)
	var postings int
	require.NoError(t, f.alice.QueryRow(f.ctx, "SELECT count(*) FROM demo.posting").Scan(&postings))
	_, err = quarantine.AcceptAsNew(f.ctx, f.alice, qid, "ext-1-rev2", "alice", "looks new")
	require.ErrorIs(t, err, quarantine.ErrImportedFinished)
	assert.Contains(t, err.Error(), "recorded by hand as done")
	_, err = quarantine.PlanAcceptOne(f.ctx, f.alice, qid, "ext-1-rev2", "alice", "looks new")
	require.ErrorIs(t, err, quarantine.ErrImportedFinished, "nor as a plan another person would approve")
	var after int
	require.NoError(t, f.alice.QueryRow(f.ctx, "SELECT count(*) FROM demo.posting").Scan(&after))
	assert.Equal(t, postings, after, "no effect ran")
}
