package quarantine_test

import (
	"fmt"
	"math/big"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/governance"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/quarantine"
)

// moneyPayload is a demo.transfer payload; a string amount is written as a
// JSON string.
func moneyPayload(amount any, currency string) string {
	a := fmt.Sprint(amount)
	if s, ok := amount.(string); ok {
		a = fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf(`{"from":"alice","to":"bob","amount":%s,"currency":%q}`, a, currency)
}

// purgeStored makes a record look as if its stored body had been purged
// under a replay horizon (what idem.record_conflict keeps then).
func purgeStored(t *testing.T, dsn string, id int64) {
	t.Helper()
	dbtest.Admin(t, dsn, fmt.Sprintf(`DO $$ BEGIN
		SET LOCAL session_replication_role = replica;
		UPDATE idem.quarantine SET stored_payload = NULL, stored_response = NULL,
		  diff = '[{"path":"","change":"stored_purged","stored":null,"incoming":null}]' WHERE id = %d;
		END $$`, id))
}

// The approver of an accept-as-new plan sees, per record, the changed
// fields (pointer: stored -> incoming), or that the stored body was purged,
// and for a money class the totals per currency of what the run applies,
// computed from the incoming payloads by the class's declaration; a record
// whose amount is not a number is named, not silently left out.
func TestReviewAcceptShowsChangesAndTotalsPerCurrency(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)
	_, err := governance.SetMoney(b.ctx, b.pool, "demo.transfer",
		&governance.Money{Amount: "/amount", Currency: "/currency", Unit: "minor"}, "alice", "")
	require.NoError(t, err)
	// demo accounts hold EUR: the stored side is EUR, the incoming may be
	// USD (it does not run here).
	type rec struct {
		op               string
		stored, incoming int
		currency         string
	}
	recs := []rec{
		{"e-1", 500, 650, "EUR"}, {"e-2", 1000, 123450, "EUR"}, {"e-3", 7, 9, "EUR"},
		{"u-1", 100, 101, "USD"}, {"u-2", 2000, 250099, "USD"},
	}
	var ids []int64
	want := map[string]*big.Rat{}
	count := map[string]int{}
	add := func(currency string, minor int) {
		if want[currency] == nil {
			want[currency] = new(big.Rat)
		}
		want[currency].Add(want[currency], big.NewRat(int64(minor), 100))
		count[currency]++
	}
	for _, r := range recs {
		_, qid := b.conflict(t, "t1", r.op, moneyPayload(r.stored, "EUR"), moneyPayload(r.incoming, r.currency))
		ids = append(ids, qid)
		add(r.currency, r.incoming)
	}
	// An amount that is not a number is named.
	_, bad := b.conflict(t, "t1", "x-1", moneyPayload(5, "EUR"), moneyPayload("five", "EUR"))
	ids = append(ids, bad)
	// A stored body purged: said so instead of a diff.
	_, purged := b.conflict(t, "t1", "p-1", moneyPayload(40, "EUR"), moneyPayload(41, "EUR"))
	ids = append(ids, purged)
	add("EUR", 41)
	purgeStored(t, b.dsn, purged)

	plan, err := quarantine.PlanAccept(b.ctx, b.pool, quarantine.Selection{IDs: ids}, 0, "{operation_id}-rev2", 10, "alice", "corrected amounts")
	require.NoError(t, err)
	r, err := quarantine.ReviewAccept(b.ctx, b.pool, plan.ID)
	require.NoError(t, err)
	require.Len(t, r.Records, len(ids))
	assert.Equal(t, len(ids), r.Open)
	require.Len(t, r.Totals, 2)
	for _, tot := range r.Totals {
		assert.Equal(t, want[tot.Currency].FloatString(2), tot.Amount, tot.Currency)
		assert.Equal(t, count[tot.Currency], tot.Records, tot.Currency)
	}
	assert.Equal(t, "EUR 1,241.50 over 4 records", r.Totals[0].String())
	require.Len(t, r.MoneyProblems, 1)
	assert.Contains(t, r.MoneyProblems[0].String(), fmt.Sprintf("record %d (t1/x-1)", bad))
	assert.Contains(t, r.MoneyProblems[0].String(), "not a number")
	byID := map[int64]quarantine.AcceptItem{}
	for _, it := range r.Records {
		byID[it.ID] = it
	}
	first := byID[ids[0]]
	assert.Equal(t, "e-1-rev2", first.NewOperationID)
	assert.True(t, first.Money)
	require.Len(t, first.Changes, 1)
	assert.Equal(t, "/amount", first.Changes[0].Path)
	assert.JSONEq(t, "500", string(first.Changes[0].Stored))
	assert.JSONEq(t, "650", string(first.Changes[0].Incoming))
	assert.True(t, byID[purged].StoredPurged)
	assert.Empty(t, byID[purged].Changes)
	assert.False(t, first.StoredPurged)
}
