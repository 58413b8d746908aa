package governance

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

// An import's money, as its seal added it up in the declared unit, is shown
// in major units per currency; a currency that is not ISO 4217 and the rows
// without a readable amount are problems that count their rows, never
// silently left out.
func TestReviewImportShowsTheSealsTotals(t *testing.T) {
	counts := `{"items": 7, "classes": {"rides.charge": 7}, "money": {"unit": "minor", "unread": 2,
		"first_unread": {"n": 4, "tenant_id": "7", "operation_id": "key-4"},
		"currencies": [{"currency": "JPY", "amount": "1500", "records": 1}, {"currency": "EUR", "amount": "123456", "records": 3},
		               {"currency": "XYZ", "amount": "10", "records": 1}]}}`
	r := ReviewImport(EntryPlan{ID: 4, Kind: EntryImport, Counts: json.RawMessage(counts)})
	var got []string
	for _, tot := range r.Totals {
		got = append(got, tot.String())
	}
	assert.Equal(t, []string{"EUR 1,234.56 over 3 records", "JPY 1,500 over 1 record"}, got)
	if assert.Len(t, r.MoneyProblems, 2) {
		assert.Equal(t, 1, r.MoneyProblems[0].Records)
		assert.Contains(t, r.MoneyProblems[0].Problem, `"XYZ" is not an ISO 4217 currency`)
		assert.Equal(t, 2, r.MoneyProblems[1].Records)
		assert.Contains(t, r.MoneyProblems[1].Ref, "row 4, 7/key-4")
	}

	none := ReviewImport(EntryPlan{ID: 5, Kind: EntryImport, Counts: json.RawMessage(`{"items": 2, "classes": {"proj.view": 2}}`)})
	assert.Empty(t, none.Totals)
	assert.Empty(t, none.MoneyProblems)
}
