package importer_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/governance"
	"github.com/idemctl/idemctl/importer"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// An import of a money class cites its contract, and its seal adds up the
// staged rows' amounts per currency by the class's declaration (JSON
// Pointers, escapes included; minor units; a decimal string), exactly as a
// record's are shown: the rows whose amount cannot be read (a fraction of
// a minor unit, a hash-only row with no payload) are counted and the first
// named.
func TestImportOfAMoneyClassAddsUpItsRows(t *testing.T) {
	t.Parallel()
	f := setup(t)
	rocketSetup(t, f)
	require.NoError(t, dbtest.Owner(f.dsn, `UPDATE idem.op_class SET money = '{"amount": "/amount", "currency": "/cur~1code", "unit": "minor"}' WHERE name = $1`, rideCharge))
	at := time.Now().Add(-24 * time.Hour).UTC()
	var b strings.Builder
	for i, payload := range []string{
		`{"amount":1250,"cur/code":"eur"}`, `{"amount":"300","cur/code":"EUR"}`, `{"amount":12.5,"cur/code":"EUR"}`,
		``, `{"amount":99,"cur/code":"USD"}`, `{"amount":-300,"cur/code":"EUR"}`,
	} {
		field := `"payload":` + payload
		if payload == "" {
			field = `"request_hash":"` + strings.Repeat("ab", 32) + `"`
		}
		fmt.Fprintf(&b, `{"tenant_id":"7","operation_id":"m-%d",%s,"response":{"ok":true},"created_at":%q,"status":"finished"}`+"\n",
			i+1, field, at.Add(time.Duration(i)*time.Second).Format(time.RFC3339Nano))
	}
	path := filepath.Join(t.TempDir(), "store.ndjson")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))

	o := importer.PlanOptions{Class: rideCharge, Correction: ridesLedger, Operator: "alice", Reason: "adopt"}
	_, err := importer.Plan(f.ctx, f.alice, importer.File(path), o, importer.Sinks{})
	require.ErrorIs(t, err, governance.ErrRefused, "a money class without its contract")
	assert.ErrorContains(t, err, "--contract")
	assert.Zero(t, countIn(t, f, "SELECT count(*) FROM idem.entry_plan"), "nothing planned")

	o.Contract = "Stripe settlement report 2026-11"
	r, err := importer.Plan(f.ctx, f.alice, importer.File(path), o, importer.Sinks{})
	require.NoError(t, err)
	review := governance.ReviewImport(r.Plan)
	var totals []string
	for _, tot := range review.Totals {
		totals = append(totals, tot.String())
	}
	assert.Equal(t, []string{"EUR 12.50 net over 3 records (1 negative: -3.00; the others 15.50)", "USD 0.99 over 1 record"}, totals)
	require.Len(t, review.MoneyProblems, 1)
	assert.Equal(t, 2, review.MoneyProblems[0].Records)
	assert.Contains(t, review.MoneyProblems[0].Ref, "row 3, 7/m-3")
	shown, err := governance.ShowEntry(f.ctx, f.bob, r.Plan.ID)
	require.NoError(t, err)
	assert.Equal(t, review.Totals, shown.Totals, "record show and the approval's question show the same")
}
