package governance_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/governance"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// A record plan made before "a JSON null response is no response" that
// holds one still runs, but that item is refused (not entered): a retry
// would otherwise be answered already_applied with nothing.
func TestRecordRunRefusesAnItemWithANullResponse(t *testing.T) {
	t.Parallel()
	f := setup(t)
	items := []governance.EntryItem{item(t, "t1", "old-1", 500), item(t, "t1", "old-2", 700)}
	o := governance.EntryOptions{Kind: governance.EntryRecord, Source: "psp report", SourceDigest: governance.DigestOf([]byte("x")),
		Operator: "alice", Reason: "PSP charged (INC-9)", Correction: "ledger correction LC-12"}
	p, err := governance.PlanEntry(f.ctx, f.alice, o, items)
	require.NoError(t, err)
	_, err = governance.ApproveEntry(f.ctx, f.bob, p.ID, "bob")
	require.NoError(t, err)
	// What an older idem.entry_plan_create let in.
	dbtest.Admin(t, f.dsn, "UPDATE idem.entry_item SET response = 'null' WHERE plan_id = $1 AND operation_id = 'old-2'", p.ID)

	done, err := governance.RunEntry(f.ctx, f.alice, p.ID, "alice")
	require.NoError(t, err)
	assert.Equal(t, 1, done.Entered)
	assert.Equal(t, 1, done.LeftAlone)
	outcomes, err := governance.EntryOutcomes(f.ctx, f.alice, p.ID)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"t1/old-1": "entered", "t1/old-2": "refused"}, outcomes)
	var n int
	require.NoError(t, f.alice.QueryRow(f.ctx, "SELECT count(*) FROM idem.identity WHERE operation_id = 'old-2'").Scan(&n))
	assert.Zero(t, n, "the item without a response did not enter")
}
