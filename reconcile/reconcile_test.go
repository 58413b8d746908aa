package reconcile_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/reconcile"
)

// A 10,000-line settlement report against an inbox of 10,000 transfers, with
// 20 seeded discrepancies of each kind: every one is found with the right
// status, and nothing else is reported. The report is shuffled and sorted in
// small chunks, so that the merge of many sorted runs is what is tested.
func TestTenThousandLinesTwentyOfEachKind(t *testing.T) {
	t.Parallel()
	f := setup(t)
	trs := make([]transfer, 10001)
	for i := 1; i <= 10000; i++ {
		trs[i] = transfer{tenant: []string{"acme", "globex"}[i%2], op: fmt.Sprintf("t-%05d", i),
			amount: int64(100 + i), currency: []string{"EUR", "USD", "GBP"}[i%3]}
	}
	// 9981-10000 are recorded before the window opens; the rest inside it.
	f.apply(trs[9981:]...)
	since := f.now()
	f.apply(trs[1:9981]...)
	// Another class's operations in the window are not this report's business.
	dbtest.RegisterAppClass(t, f.dsn, "proj.view", "horizon")
	dbtest.Seed(t, f.dsn, "proj.view", "acme", "v-", 50, 0, time.Millisecond)
	lines, want := seededReport(trs)
	report := f.file("settlement.csv", append([]string{csvHeader}, lines...)...)

	m := settlementMapping(report)
	m.Since = since.Format(time.RFC3339Nano)
	sum, found, err := f.run(reconcile.Config{Mapping: m, ChunkBytes: 64 << 10, BatchSize: 700})
	require.NoError(t, err)

	got := map[string][]reconcile.Status{}
	for _, x := range found {
		k := x.Tenant + "/" + x.OperationID
		got[k] = append(got[k], x.Status)
		if x.Status == reconcile.Invalid {
			assert.Equal(t, x.Line, lineOf(lines, x), "the invalid line's number: %+v", x)
		}
	}
	for k := range want {
		slices.Sort(want[k])
		slices.Sort(got[k])
	}
	assert.Equal(t, want, got)
	assert.Equal(t, map[reconcile.Status]int64{reconcile.Matched: 9940, reconcile.Mismatch: 20,
		reconcile.MissingInInbox: 20, reconcile.MissingInReport: 20, reconcile.Invalid: 10, reconcile.DuplicateInReport: 10}, sum.Counts)
	assert.EqualValues(t, 10000, sum.Report.Lines)
	assert.Contains(t, sum.Withheld, "10 invalid line(s)")
	checkSeededFindings(t, found)

	// Amounts per currency per status: the 20 unknown settlements are 999 EUR each.
	assert.Equal(t, reconcile.Totals{Report: "19980"}, sum.Amounts[reconcile.MissingInInbox]["EUR"])
	var inWindowMissing int64
	for i := 9961; i <= 9980; i++ {
		if trs[i].currency == "USD" {
			inWindowMissing += trs[i].amount
		}
	}
	assert.Equal(t, fmt.Sprint(inWindowMissing), sum.Amounts[reconcile.MissingInReport]["USD"].Inbox)
}

// seededReport is the settlement report of the transfers 1-10000 with 20
// discrepancies of each kind, shuffled, and the statuses expected per
// identity: 20 mismatches (10 amounts, 10 currencies), 10 invalid lines (amounts
// that are not numbers), 10 identities settled twice, 20 settlements
// the inbox never recorded, 20 transfers of the window not settled; 10
// settlements of transfers recorded before the window match.
func seededReport(trs []transfer) ([]string, map[string][]reconcile.Status) {
	want := map[string][]reconcile.Status{}
	var lines []string
	add := func(tr transfer, line string, st reconcile.Status) {
		k := tr.tenant + "/" + tr.op
		want[k] = append(want[k], st)
		if line != "" {
			lines = append(lines, line)
		}
	}
	for i := 1; i <= 9960; i++ {
		tr, changed := trs[i], trs[i]
		switch {
		case i%100 == 0 && i <= 1000:
			changed.amount++
			add(tr, csvLine(changed), reconcile.Mismatch)
		case i%100 == 0 && i <= 2000:
			changed.currency = "CHF"
			add(tr, csvLine(changed), reconcile.Mismatch)
		case i >= 3000 && i < 3010:
			add(tr, fmt.Sprintf("%s,%s,\"1.250,00\",%s,settled", tr.tenant, tr.op, tr.currency), reconcile.Invalid)
		default:
			add(tr, csvLine(tr), reconcile.Matched)
		}
	}
	for i := 4000; i < 4010; i++ {
		add(trs[i], csvLine(trs[i]), reconcile.DuplicateInReport)
	}
	for i := 1; i <= 20; i++ {
		tr := transfer{tenant: "acme", op: fmt.Sprintf("u-%02d", i), amount: 999, currency: "EUR"}
		add(tr, csvLine(tr), reconcile.MissingInInbox)
	}
	for i := 9981; i <= 9990; i++ {
		add(trs[i], csvLine(trs[i]), reconcile.Matched)
	}
	for i := 9961; i <= 9980; i++ {
		add(trs[i], "", reconcile.MissingInReport)
	}
	rng := rand.New(rand.NewPCG(17, 17))
	rng.Shuffle(len(lines), func(i, j int) { lines[i], lines[j] = lines[j], lines[i] })
	return lines, want
}

// checkSeededFindings checks what each seeded discrepancy says.
func checkSeededFindings(t *testing.T, found []reconcile.Finding) {
	t.Helper()
	for _, x := range found {
		switch {
		case x.Status == reconcile.Mismatch && x.OperationID <= "t-01000":
			require.Len(t, x.Differences, 1, "%+v", x)
			assert.Equal(t, "/amount", x.Differences[0].Pointer)
			assert.Equal(t, "amount_minor", x.Differences[0].Column)
		case x.Status == reconcile.Mismatch:
			require.Len(t, x.Differences, 1, "%+v", x)
			assert.Equal(t, "/currency", x.Differences[0].Pointer)
			assert.Equal(t, "CHF", x.Differences[0].Report)
		case x.Status == reconcile.Invalid && x.OperationID < "t-04000":
			assert.Contains(t, x.Reason, `amount_minor is not a number: "1.250,00"`)
		case x.Status == reconcile.DuplicateInReport:
			assert.Contains(t, x.Reason, "(settled twice?)")
			require.Len(t, x.Lines, 2)
			assert.Less(t, x.Lines[0], x.Lines[1])
		case x.Status == reconcile.Matched && x.OperationID > "t-09980":
			assert.Contains(t, x.Note, "outside the window")
		}
	}
}

// lineOf is the file line (header = 1) of the report line a finding names.
func lineOf(lines []string, x reconcile.Finding) int64 {
	var last int64
	for i, l := range lines {
		if strings.HasPrefix(l, x.Tenant+","+x.OperationID+",") {
			last = int64(i + 2)
			if last == x.Line {
				return last
			}
		}
	}
	return last
}
