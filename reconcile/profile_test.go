package reconcile_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/reconcile"
)

const stripeHeader = "balance_transaction_id,created_utc,created,currency,gross,fee,net,reporting_category,source_id," +
	"description,customer_facing_amount,customer_facing_currency,customer_id,charge_id,payment_intent_id,invoice_id," +
	"payment_method_type,payment_metadata[operation_id],refund_metadata[reason]"

// stripeRow is one row of an itemized balance report: gross in major units
// (minor/100, or as is for JPY), the currency in lower case.
func stripeRow(n int, category, op string, minor int64, currency, description string) string {
	gross := fmt.Sprintf("%d.%02d", minor/100, abs(minor)%100)
	if minor < 0 && minor > -100 {
		gross = "-" + gross
	}
	if currency == "JPY" {
		gross = fmt.Sprint(minor)
	}
	return fmt.Sprintf("txn_%06d,2026-11-01 10:00:00,2026-11-01 10:00:00,%s,%s,0.30,%s,%s,ch_%06d,%s,%s,%s,cus_1,ch_%06d,pi_%06d,,card,%s,",
		n, strings.ToLower(currency), gross, gross, category, n, description, gross, strings.ToLower(currency), n, n, op)
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// The export as it comes: a Stripe-shaped itemized balance report of 10,060
// rows (a BOM, CRLF, decimal amounts, lowercase currencies, a description
// with a quoted newline), reconciled with the built-in profile and no
// script. The inbox holds 9,970 charges; the report settles 9,940 of them
// (30 missing in the report) and 30 the inbox never recorded, with 30
// amounts off by a cent, 30 JPY charges (no minor unit), 30 charges on two
// rows, 30 refunds (15 of the whole amount, 15 of part of it) and 30 fee
// rows. The counts are computed by the test as it builds the rows.
func TestStripeItemizedReportAsItComes(t *testing.T) {
	t.Parallel()
	f := setup(t)
	trs := make([]transfer, 9971)
	for i := 1; i <= 9970; i++ {
		trs[i] = transfer{tenant: "acme", op: fmt.Sprintf("op-%05d", i), amount: int64(1000 + i), currency: []string{"EUR", "USD"}[i%2]}
		if i >= 300 && i < 330 {
			trs[i].currency, trs[i].amount = "JPY", 1250
		}
	}
	f.apply(trs[1:]...)

	want := map[reconcile.Status]int64{}
	var rows []string
	n := 0
	row := func(category, op string, minor int64, currency, description string) {
		n++
		rows = append(rows, stripeRow(n, category, op, minor, currency, description))
	}
	for i := 1; i <= 9940; i++ {
		tr := trs[i]
		switch {
		case i >= 200 && i < 230:
			row("charge", tr.op, tr.amount+1, tr.currency, "charge")
			want[reconcile.Mismatch]++
		case i >= 100 && i < 130:
			row("charge", tr.op, tr.amount, tr.currency, "charge")
			row("charge", tr.op, tr.amount, tr.currency, "charge")
			want[reconcile.Matched]++
			want[reconcile.DuplicateInReport]++
		case i >= 400 && i < 415:
			row("charge", tr.op, tr.amount, tr.currency, "charge")
			row("refund", tr.op, -tr.amount, tr.currency, "REFUND FOR CHARGE")
			want[reconcile.Refunded]++
		case i >= 415 && i < 430:
			row("charge", tr.op, tr.amount, tr.currency, "charge")
			row("refund", tr.op, -100, tr.currency, "REFUND FOR CHARGE")
			want[reconcile.PartiallyRefunded]++
		case i == 500:
			row("charge", tr.op, tr.amount, tr.currency, "\"a description, with a comma\r\nand a line break\"")
			want[reconcile.Matched]++
		default:
			row("charge", tr.op, tr.amount, tr.currency, "charge")
			want[reconcile.Matched]++
		}
	}
	want[reconcile.MissingInReport] = 30
	for i := 1; i <= 30; i++ {
		row("charge", fmt.Sprintf("unknown-%02d", i), 999, "EUR", "charge")
		row("fee", "", -15, "EUR", "Billing - Usage Fee")
	}
	want[reconcile.MissingInInbox] = 30
	require.Len(t, rows, 10060)
	rng := rand.New(rand.NewPCG(27, 27))
	rng.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
	path := filepath.Join(f.dir, "balance_change_from_activity.itemized.csv")
	text := "\ufeff" + stripeHeader + "\r\n" + strings.Join(rows, "\r\n") + "\r\n"
	require.NoError(t, os.WriteFile(path, []byte(text), 0o600))

	m := reconcile.Mapping{Class: "demo.transfer", Report: path, Profile: "stripe-balance-itemized", Tenant: "acme"}
	batch := filepath.Join(f.dir, "missing.ndjson")
	sum, found, err := f.run(reconcile.Config{Mapping: m, ChunkBytes: 256 << 10, BatchSize: 500, EmitResolve: batch, Pin: true})
	require.NoError(t, err)
	assert.Equal(t, want, sum.Counts)
	assert.EqualValues(t, 10060, sum.Report.Lines)
	assert.EqualValues(t, 30, sum.Report.Filtered)
	assert.Empty(t, sum.Withheld, "duplicates do not stop --emit-resolve and --pin")
	assert.EqualValues(t, 30, sum.Emitted)
	assert.EqualValues(t, want[reconcile.Mismatch]+want[reconcile.MissingInInbox]+want[reconcile.MissingInReport]+
		want[reconcile.DuplicateInReport], sum.Pinned)
	// Amounts per currency: the refunded charges as the report has them, in
	// minor units.
	var refundedEUR int64
	for i := 400; i < 415; i++ {
		if trs[i].currency == "EUR" {
			refundedEUR += trs[i].amount
		}
	}
	assert.Equal(t, fmt.Sprint(refundedEUR), sum.Amounts[reconcile.Refunded]["EUR"].Report)
	for _, x := range found {
		switch x.Status {
		case reconcile.Mismatch:
			require.Len(t, x.Differences, 1, "%+v", x)
			assert.Equal(t, "/amount", x.Differences[0].Pointer)
		case reconcile.PartiallyRefunded:
			require.Len(t, x.Reversals, 1)
			assert.Equal(t, "refund", x.Reversals[0].Kind)
			assert.Equal(t, "100", x.Reversed)
		case reconcile.Refunded:
			assert.Equal(t, x.Amount, x.Reversed, "%+v", x)
		case reconcile.DuplicateInReport:
			require.Len(t, x.Lines, 2)
			assert.NotEqual(t, x.Lines[0], x.Lines[1])
		case reconcile.Matched:
			if x.Currency == "JPY" {
				assert.Equal(t, "1250", x.Amount)
			}
		}
	}
}

// The Adyen fixture: Settled rows match in major units (EUR, JPY, KWD),
// Refunded and Chargeback rows reverse their payment, Fee and
// MerchantPayout rows are left out, a debit is a reversal's amount.
func TestAdyenSettlementFixture(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.apply(
		transfer{tenant: "acme", op: "order-1001", amount: 1250, currency: "EUR"},
		transfer{tenant: "acme", op: "order-1002", amount: 4999, currency: "EUR"},
		transfer{tenant: "acme", op: "order-1003", amount: 1250, currency: "JPY"},
		transfer{tenant: "acme", op: "order-1004", amount: 12345, currency: "KWD"},
		transfer{tenant: "acme", op: "order-1005", amount: 2000, currency: "EUR"},
		transfer{tenant: "acme", op: "order-1006", amount: 700, currency: "EUR"},
		transfer{tenant: "acme", op: "order-1008", amount: 300, currency: "EUR"},
	)
	records := filepath.Join(t.TempDir(), "unrecorded.ndjson")
	sum, found, err := f.run(reconcile.Config{Mapping: reconcile.Mapping{Class: "demo.transfer",
		Report: "testdata/adyen-settlement.csv", Profile: "adyen-settlement", Tenant: "acme"}, EmitRecord: records})
	require.NoError(t, err)
	// The payment the inbox never recorded, as a record plan line with the
	// Psp Reference as evidence.
	assert.EqualValues(t, 1, sum.RecordLines)
	raw, err := os.ReadFile(records)
	require.NoError(t, err)
	var line reconcile.RecordLine
	require.NoError(t, json.Unmarshal(raw, &line))
	assert.Equal(t, "order-1007", line.OperationID)
	assert.Regexp(t, `^provider report adyen-settlement\.csv sha256:[0-9a-f]{64} line 10: provider reference 8800000000000009, 310 EUR \(minor units\)$`, line.Evidence)
	byOp := map[string]reconcile.Finding{}
	for _, x := range found {
		byOp[x.OperationID] = x
	}
	assert.Equal(t, map[reconcile.Status]int64{reconcile.Matched: 3, reconcile.Refunded: 1, reconcile.PartiallyRefunded: 1,
		reconcile.Mismatch: 1, reconcile.MissingInInbox: 1, reconcile.MissingInReport: 1}, sum.Counts)
	assert.EqualValues(t, 3, sum.Report.Filtered)
	assert.Equal(t, reconcile.Matched, byOp["order-1003"].Status, "1250 JPY is 1250")
	assert.Equal(t, reconcile.Matched, byOp["order-1004"].Status, "12.345 KWD is 12345")
	assert.Equal(t, reconcile.Refunded, byOp["order-1002"].Status)
	assert.Equal(t, "4999", byOp["order-1002"].Reversed)
	assert.Equal(t, reconcile.PartiallyRefunded, byOp["order-1005"].Status)
	require.Len(t, byOp["order-1005"].Reversals, 1)
	assert.Equal(t, "Chargeback", byOp["order-1005"].Reversals[0].Kind)
	assert.Equal(t, reconcile.Mismatch, byOp["order-1001"].Status)
	assert.Equal(t, reconcile.MissingInInbox, byOp["order-1007"].Status)
	assert.Equal(t, reconcile.MissingInReport, byOp["order-1008"].Status)
}

// A user's profile file: ";" between fields, a decimal comma, major units,
// a per-currency override, a row filter. Amounts with more decimals than
// the currency allows, and codes that are not ISO 4217, are invalid with
// that reason; currencies compare whatever their case.
func TestProfileFileAmountsAndSeparators(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.apply(
		transfer{tenant: "acme", op: "a-1", amount: 1250, currency: "EUR"},
		transfer{tenant: "acme", op: "a-2", amount: 1250, currency: "JPY"},
		transfer{tenant: "acme", op: "a-3", amount: 1250, currency: "BHD"},
		transfer{tenant: "acme", op: "a-4", amount: 12345, currency: "CLF"},
		transfer{tenant: "acme", op: "a-5", amount: 500, currency: "HUF"},
		transfer{tenant: "acme", op: "a-6", amount: 1250, currency: "EUR"},
		transfer{tenant: "acme", op: "a-7", amount: 1250, currency: "EUR"},
	)
	profile := f.file("psp.json", `{"name": "psp", "delimiter": ";", "decimal_separator": ",",
		"key": "tenant=merchant,operation_id=ref", "compare": "/amount=amount,/currency=ccy",
		"amount_unit": "major", "minor_units": {"huf": 0}, "where": ["kind=payment"]}`)
	report := f.file("psp.csv.gz",
		"\ufeffmerchant;ref;amount;ccy;kind",
		"acme;a-1;12,50;eur;payment",
		"acme;a-2;1250;jpy;payment",
		"acme;a-3;1,250;BHD;payment",
		"acme;a-4;1,2345;clf;payment",
		"acme;a-5;500;HUF;payment",
		"acme;a-6;12,505;EUR;payment",
		"acme;a-7;12,50;XYZ;payment",
		"acme;a-6;0,30;EUR;fee",
	)
	sum, found, err := f.run(reconcile.Config{Mapping: reconcile.Mapping{Class: "demo.transfer", Report: report, ProfileFile: profile}})
	require.NoError(t, err)
	assert.Equal(t, map[reconcile.Status]int64{reconcile.Matched: 5, reconcile.Invalid: 2}, sum.Counts)
	assert.EqualValues(t, 1, sum.Report.Filtered)
	reasons := map[string]string{}
	for _, x := range found {
		reasons[x.OperationID] = x.Reason
	}
	assert.Equal(t, "amount 12.505 EUR has more decimals than EUR allows (2)", reasons["a-6"])
	assert.Equal(t, `ccy: "XYZ" is not an ISO 4217 currency code`, reasons["a-7"])

	// A tab-separated file reads with --delimiter; a stray quote is named
	// by its line and column.
	tab := f.file("tab.csv", "merchant\tref\tamount\tccy\tkind", "acme\ta-1\t12.50\tEUR\tpayment", "acme\ta-2\t12\"50\tJPY\tpayment")
	_, found, err = f.run(reconcile.Config{Mapping: reconcile.Mapping{Class: "demo.transfer", Report: tab, ProfileFile: profile,
		Delimiter: "\t", Rows: reconcile.Rows{DecimalSeparator: "."}}})
	require.NoError(t, err)
	require.NotEmpty(t, found)
	assert.Equal(t, reconcile.Invalid, found[0].Status)
	assert.Equal(t, `not CSV at line 3, column 12: bare " in non-quoted-field`, found[0].Reason)
	assert.Equal(t, reconcile.Matched, found[1].Status, "%+v", found[1])
}

func TestUnknownProfile(t *testing.T) {
	_, err := reconcile.Mapping{Class: "c", Report: "r", Tenant: "t", Profile: "paypal"}.Check(time.Now())
	require.ErrorIs(t, err, reconcile.ErrInvalidMapping)
	assert.Contains(t, err.Error(), "adyen-settlement, stripe-balance-itemized")
	_, err = reconcile.Mapping{Class: "c", Report: "r", Tenant: "t", Key: "operation_id=ref", Compare: "/amount=a",
		Rows: reconcile.Rows{AmountUnit: "major"}}.Check(time.Now())
	assert.ErrorContains(t, err, "needs the amount and the currency")
}
