package approvalsview

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/idemctl/idemctl/governance"
)

// A record plan with an identity the inbox already holds: the view counts
// what enters without it and names it, with what the run does to it.
func TestEntryApprovalNamesIdentitiesAlreadyHeld(t *testing.T) {
	t.Parallel()
	r := governance.EntryReview{EntryPlan: governance.EntryPlan{ID: 3, Kind: governance.EntryRecord, State: "planned", Items: 2, Source: "charges.ndjson"},
		Entries: []governance.EntryLine{
			{Seq: 1, TenantID: "t1", OperationID: "ext-1", Class: "demo.transfer", Evidence: "psp ch_1", Held: "another payload", Amount: "EUR 50.00"},
			{Seq: 2, TenantID: "t1", OperationID: "ext-2", Class: "demo.transfer", Evidence: "psp ch_2", Amount: "EUR 1.00"},
		}}
	p := EntryApproval(r)
	assert.Equal(t, "1 identit(ies) enter without their effect, from charges.ndjson; 1 already in the inbox do not enter (named below)", p.What)
	assert.Equal(t, "t1/ext-1", p.Items[0].Identity)
	assert.Contains(t, strings.Join(p.Items[0].Lines, " "), "already in the inbox with another payload: not entered, quarantined at the run")
	assert.NotContains(t, strings.Join(p.Items[1].Lines, " "), "already in the inbox")
}
