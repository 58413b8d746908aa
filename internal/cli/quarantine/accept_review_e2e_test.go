package quarantine_test

import (
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// expectedTotals sums the incoming amounts of the open records of source
// per currency, in SQL (numeric, not the Go code under test), as
// "EUR 3,000.06 over 3 records" keyed by currency.
func expectedTotals(t *testing.T, fx cliFixture, source string) map[string]string {
	t.Helper()
	rows, err := fx.Pool.Query(fx.Ctx, `SELECT incoming_payload::jsonb ->> 'currency', sum((incoming_payload::jsonb ->> 'amount')::numeric), count(*)
		FROM idem.quarantine WHERE status = 'open' AND incoming_transport ->> 'source' = $1 GROUP BY 1`, source)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var cur, sum string
		var n int
		require.NoError(t, rows.Scan(&cur, &sum, &n))
		minor, ok := new(big.Int).SetString(sum, 10)
		require.True(t, ok, sum)
		major := new(big.Rat).SetFrac(minor, big.NewInt(100)).FloatString(2)
		intPart, frac, _ := strings.Cut(major, ".")
		var b strings.Builder
		for i, r := range intPart {
			if i > 0 && (len(intPart)-i)%3 == 0 {
				b.WriteByte(',')
			}
			b.WriteRune(r)
		}
		out[cur] = fmt.Sprintf("%s %s.%s over %d records", cur, b.String(), frac, n)
	}
	require.NoError(t, rows.Err())
	return out
}

// The approver of a bulk accept-as-new of a money class sees what will run:
// per record the changed fields, and the totals per currency the run
// applies, in the prompt, in bulk show (table and JSON) and in the
// planner's JSON; refusals are unchanged (the planner, no --yes without a
// terminal).
func TestBulkAcceptShowsChangesAndMoneyTotals(t *testing.T) {
	t.Parallel()
	fx := newCLIFixture(t)
	dbtest.SeedConflicts(t, fx.DSN,
		dbtest.ClientBug{Prefix: "e-", N: 3, Change: "amount", Source: "psp"},
		dbtest.ClientBug{Prefix: "u-", N: 2, Change: "currency", Source: "psp"})
	bob := dbtest.As(fx.DSN, dbtest.Operator2)
	code, _, errOut := runQ(t, fx.DSN, "class", "set", "demo.transfer", "--money", "/amount,/currency,minor", "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	// The stored body of u-00002 was purged under a replay horizon: no diff.
	dbtest.Admin(t, fx.DSN, `DO $$ BEGIN
		SET LOCAL session_replication_role = replica;
		UPDATE idem.quarantine SET stored_payload = NULL, stored_response = NULL,
		  diff = '[{"path":"","change":"stored_purged","stored":null,"incoming":null}]' WHERE operation_id = 'u-00002';
		END $$`)
	want := expectedTotals(t, fx, "psp")
	require.Len(t, want, 2)
	require.Equal(t, "EUR 3,000.06 over 3 records", want["EUR"], "the fixture's amounts")

	code, out, errOut := runQ(t, fx.DSN, "quarantine", "accept-as-new", "--source", "psp", "--rule", "{operation_id}-rev2",
		"--max", "10", "--reason", "revisions", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	plan := jsonLines(t, out)[0]
	id := fmt.Sprint(plan["id"])
	assertJSONTotals(t, plan, want)

	// The prompt: totals in the question, each record's changes above it.
	code, _, errOut = runTTY(t, bob, "n\n", "quarantine", "bulk", "approve", id)
	assert.Equal(t, cmdutil.ExitFailure, code, "answered no: nothing done")
	question := errOut[strings.LastIndex(errOut, "Approve plan"):]
	for _, tot := range want {
		assert.Contains(t, question, tot)
	}
	assert.Contains(t, errOut, "/amount: 1 -> 100001")
	assert.Contains(t, errOut, `/currency: "EUR" -> "USD"`)
	assert.Contains(t, errOut, "e-00001-rev2")
	assert.Equal(t, "planned", fx.State(t, id))

	// show: the table and the JSON carry the same.
	code, out, errOut = runQ(t, fx.DSN, "quarantine", "bulk", "show", id, "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	for _, tot := range want {
		assert.Contains(t, out, tot)
	}
	assert.Contains(t, out, "/amount: 2 -> 100002")
	assert.Contains(t, out, "u-00002-rev2")
	assert.Contains(t, out, "stored body purged: no diff")
	code, out, errOut = runQ(t, fx.DSN, "quarantine", "bulk", "show", id, "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	shown := jsonLines(t, out)[0]
	assertJSONTotals(t, shown, want)
	records := shown["records"].([]any)
	require.Len(t, records, 5)
	first := records[0].(map[string]any)
	changes := first["changes"].([]any)
	require.Len(t, changes, 1)
	assert.Equal(t, "/amount", changes[0].(map[string]any)["path"])
	assert.EqualValues(t, 100001, changes[0].(map[string]any)["incoming"])
	assert.Equal(t, false, first["stored_purged"])
	assert.Equal(t, true, records[4].(map[string]any)["stored_purged"], "u-00002")
	assert.Empty(t, records[4].(map[string]any)["changes"])

	// Refusals are unchanged.
	code, _, errOut = runQ(t, fx.DSN, "quarantine", "bulk", "approve", id, "--yes")
	assert.Equal(t, cmdutil.ExitInvalid, code, "the planner cannot approve")
	assert.Contains(t, errOut, "four-eyes")
	code, _, _ = runQ(t, bob, "quarantine", "bulk", "approve", id)
	assert.Equal(t, cmdutil.ExitUsage, code, "no terminal, no --yes")
	code, out, errOut = runQ(t, bob, "quarantine", "bulk", "approve", id, "--yes", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assertJSONTotals(t, jsonLines(t, out)[0], want)

	// The run's question says what it applies too.
	code, _, errOut = runTTY(t, fx.DSN, "n\n", "quarantine", "bulk", "run", id)
	assert.Equal(t, cmdutil.ExitFailure, code, "answered no")
	question = errOut[strings.LastIndex(errOut, "Run 5 record(s)"):]
	for _, tot := range want {
		assert.Contains(t, question, tot)
	}
	assert.Equal(t, "approved", fx.State(t, id), "nothing ran")
}

func assertJSONTotals(t *testing.T, doc map[string]any, want map[string]string) {
	t.Helper()
	totals, ok := doc["totals"].([]any)
	require.True(t, ok, "totals in %v", doc)
	require.Len(t, totals, len(want))
	for _, x := range totals {
		tot := x.(map[string]any)
		cur := fmt.Sprint(tot["currency"])
		amount := strings.ReplaceAll(strings.Fields(want[cur])[1], ",", "")
		assert.Equal(t, amount, tot["amount"], cur)
		assert.Equal(t, want[cur], fmt.Sprintf("%s %s over %v records", cur, strings.Fields(want[cur])[1], tot["records"]))
	}
}

// A record plan of a money class shows its identities, evidence and totals
// per currency (computed here from the file's amounts) in record show (table
// and JSON), record list and the approval's question; an item whose amount
// is missing is named, not silently left out; the planner still cannot
// approve it.
func TestRecordPlanShowsItemsEvidenceAndTotals(t *testing.T) {
	t.Parallel()
	_, dsn := dbtest.NewPool(t, 2)
	bob := dbtest.As(dsn, dbtest.Operator2)
	code, _, errOut := runQ(t, dsn, "class", "set", "demo.transfer", "--money", "/amount,/currency,minor", "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	items := []struct {
		op       string
		amount   int
		currency string
	}{{"psp-1", 90000, "EUR"}, {"psp-2", 12345, "EUR"}, {"psp-3", 500, "USD"}, {"psp-4", 1, "USD"}, {"psp-5", 99, "JPY"}}
	var lines strings.Builder
	sums := map[string]int{}
	counts := map[string]int{}
	for _, it := range items {
		fmt.Fprintf(&lines, `{"tenant_id":"t1","operation_id":%q,"class":"demo.transfer","payload":{"to":"bob","from":"alice","amount":%d,"currency":%q},"response":{"status":"charged"},"evidence":"psp ref %s"}`+"\n",
			it.op, it.amount, it.currency, it.op)
		sums[it.currency] += it.amount
		counts[it.currency]++
	}
	lines.WriteString(`{"tenant_id":"t1","operation_id":"psp-x","class":"demo.transfer","payload":{"to":"bob","from":"alice","currency":"EUR"},"response":{"status":"charged"},"evidence":"psp ref psp-x"}` + "\n")
	want := []string{
		fmt.Sprintf("EUR %s over %d records", groupedMajor(sums["EUR"], 2), counts["EUR"]),
		fmt.Sprintf("USD %s over %d records", groupedMajor(sums["USD"], 2), counts["USD"]),
		fmt.Sprintf("JPY %s over %d record", groupedMajor(sums["JPY"], 0), counts["JPY"]),
	}
	require.Equal(t, "EUR 1,023.45 over 2 records", want[0], "the fixture's amounts")
	file := filepath.Join(t.TempDir(), "charges.ndjson")
	require.NoError(t, os.WriteFile(file, []byte(lines.String()), 0o644))
	code, out, errOut := runQ(t, dsn, "record", "plan", "--file", file, "--reason", "INC-9", "--contract", "PSP-2024-7",
		"--correction", "LC-12 by finance", "--operator", "alice", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	id := fmt.Sprint(jsonLines(t, out)[0]["id"])

	code, out, errOut = runQ(t, dsn, "record", "show", id, "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	for _, w := range want {
		assert.Contains(t, out, w)
	}
	assert.Contains(t, out, "psp ref psp-3")
	assert.Contains(t, out, "USD 5.00")
	assert.Contains(t, out, "item 6 (t1/psp-x): no amount at /amount: not in the totals")
	code, out, errOut = runQ(t, dsn, "record", "show", id, "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	doc := jsonLines(t, out)[0]
	totals := doc["totals"].([]any)
	require.Len(t, totals, 3)
	assert.Equal(t, map[string]any{"currency": "EUR", "amount": "1023.45", "records": float64(2)}, totals[0])
	assert.Len(t, doc["entries"].([]any), 6)
	assert.Len(t, doc["money_problems"].([]any), 1)
	code, _, _ = runQ(t, dsn, "record", "show", "999999")
	assert.Equal(t, cmdutil.ExitNotFound, code)

	code, out, errOut = run(t, dsn, "", "record", "list", "-o", "wide")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	for _, w := range want {
		assert.Contains(t, out, w)
	}

	code, _, errOut = runTTY(t, bob, "n\n", "record", "approve", id)
	assert.Equal(t, cmdutil.ExitFailure, code, "answered no")
	question := errOut[strings.LastIndex(errOut, "Approve entry plan"):]
	for _, w := range want {
		assert.Contains(t, question, w)
	}
	assert.Contains(t, errOut, "psp ref psp-1")
	code, _, _ = runQ(t, bob, "record", "approve", id)
	assert.Equal(t, cmdutil.ExitUsage, code, "no terminal, no --yes")
	code, _, errOut = runQ(t, dsn, "record", "approve", id, "--yes")
	assert.Equal(t, cmdutil.ExitInvalid, code, "the planner cannot approve: %s", errOut)
	code, _, errOut = runQ(t, bob, "record", "approve", id, "--yes")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
}

// groupedMajor writes minor units as major ones with exp decimals and
// thousands separators, independently of the code under test.
func groupedMajor(minor, exp int) string {
	s := fmt.Sprint(minor)
	frac := ""
	if exp > 0 {
		for len(s) <= exp {
			s = "0" + s
		}
		s, frac = s[:len(s)-exp], "."+s[len(s)-exp:]
	}
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String() + frac
}
