package reconcile_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/reconcile"
	"github.com/idemctl/idemctl/recovery"
)

// smallLedger applies six transfers p-1..p-6 of acme and returns them.
func (f *fixture) smallLedger() []transfer {
	trs := make([]transfer, 7)
	for i := 1; i <= 6; i++ {
		trs[i] = transfer{tenant: "acme", op: "p-" + string(rune('0'+i)), amount: int64(1000 * i), currency: "EUR"}
	}
	f.apply(trs[1:]...)
	return trs
}

// The missing_in_report operations become a resolve batch with their stored
// payloads; every discrepancy is pinned with the report's name and line; the
// run is audited with the report's SHA-256. Running it again pins nothing
// twice, and an existing batch file is not replaced unless asked.
func TestEmitPinAndAudit(t *testing.T) {
	t.Parallel()
	f := setup(t)
	trs := f.smallLedger()
	changed := trs[2]
	changed.amount = 1999
	unknown := transfer{tenant: "acme", op: "x-9", amount: 5, currency: "EUR"}
	report := f.file("settlement.csv", csvHeader, csvLine(trs[1]), csvLine(changed), csvLine(trs[3]), csvLine(trs[4]), csvLine(unknown))
	batch := filepath.Join(f.dir, "missing.ndjson")
	cfg := reconcile.Config{Mapping: settlementMapping(report), EmitResolve: batch, Pin: true}

	sum, found, err := f.run(cfg)
	require.NoError(t, err)
	assert.Equal(t, map[reconcile.Status]int64{reconcile.Matched: 3, reconcile.Mismatch: 1,
		reconcile.MissingInInbox: 1, reconcile.MissingInReport: 2}, sum.Counts)
	assert.Len(t, found, 7)
	assert.Empty(t, sum.Withheld)
	assert.EqualValues(t, 2, sum.Emitted)
	assert.EqualValues(t, 4, sum.Pinned)

	// The batch: exactly p-5 and p-6, with their stored payloads, readable
	// by resolve.
	body, err := os.ReadFile(batch)
	require.NoError(t, err)
	var ops []string
	for _, req := range readBatch(t, body) {
		require.NoError(t, recovery.Check(req, idem.PayloadLimits{}))
		ops = append(ops, req.OperationID)
		i := int(req.OperationID[2] - '0')
		assert.JSONEq(t, trs[i].payload(), string(req.Payload))
	}
	assert.Equal(t, []string{"p-5", "p-6"}, ops)

	// The pins: one pending correction per discrepancy, naming the report's
	// file and line.
	reasons := map[string]string{}
	rows, err := f.pool.Query(f.ctx, "SELECT operation_id, reason FROM idem.horizon_correction WHERE done_at IS NULL")
	require.NoError(t, err)
	for rows.Next() {
		var op, reason string
		require.NoError(t, rows.Scan(&op, &reason))
		reasons[op] = reason
	}
	require.NoError(t, rows.Err())
	sha := fileSHA(t, report)
	require.Len(t, reasons, 4)
	assert.Equal(t, "reconcile settlement.csv line 3: mismatch: /amount: inbox 2000, report 1999; 2000 EUR; report sha256:"+sha, reasons["p-2"], "the whole hash")
	assert.Contains(t, reasons["x-9"], "settlement.csv line 6: missing_in_inbox: 5 EUR; the report settled an operation the inbox never recorded")
	assert.Contains(t, reasons["p-5"], "settlement.csv: missing_in_report: recorded ")

	// The audit row carries the report's SHA-256.
	var details map[string]any
	var target string
	require.NoError(t, f.pool.QueryRow(f.ctx, `SELECT target, details::jsonb FROM idem.audit
		WHERE action = 'reconcile.run' ORDER BY id DESC LIMIT 1`).Scan(&target, &details))
	assert.Equal(t, "report:sha256:"+sha, target)
	assert.Equal(t, sha, details["report"].(map[string]any)["sha256"])
	assert.EqualValues(t, 4, details["pinned"])
	assert.EqualValues(t, sum.AuditID, f.count("SELECT max(id) FROM idem.audit WHERE action = 'reconcile.run'"))

	// Again: the batch file exists, so nothing runs; with overwrite, the same
	// discrepancies are not pinned twice.
	audits := f.count("SELECT count(*) FROM idem.audit")
	_, found, err = f.run(cfg)
	assert.ErrorIs(t, err, reconcile.ErrFileExists)
	assert.Empty(t, found)
	assert.Equal(t, audits, f.count("SELECT count(*) FROM idem.audit"))
	cfg.Overwrite = true
	sum, _, err = f.run(cfg)
	require.NoError(t, err)
	assert.EqualValues(t, 0, sum.Pinned)
	assert.EqualValues(t, 4, sum.AlreadyPinned)
	assert.EqualValues(t, 4, f.count("SELECT count(*) FROM idem.horizon_correction WHERE done_at IS NULL"))
}

func fileSHA(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Bad reports: a clear error, and nothing written (no batch, no pin; a
// report that cannot be read is not even recorded as a run).
func TestBadReports(t *testing.T) {
	t.Parallel()
	f := setup(t)
	trs := f.smallLedger()
	good := csvLine(trs[1])
	truncated := func() string {
		path := f.file("truncated.csv.gz", csvHeader, good, csvLine(trs[2]), csvLine(trs[3]))
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, b[:len(b)-12], 0o600))
		return path
	}
	cases := []struct {
		name, report string
		wantErr      error
		message      string
	}{
		{"missing mapped column", f.file("nocurrency.csv", "merchant,reference,amount_minor", "acme,p-1,1000"),
			reconcile.ErrInvalidReport, `nocurrency.csv has no column "currency" (mapped by --compare /currency=currency)`},
		{"non-numeric amount", f.file("amount.csv", csvHeader, good, "acme,p-2,twelve,EUR,settled"), nil,
			`amount_minor is not a number: "twelve"`},
		{"truncated gzip", truncated(), reconcile.ErrInvalidReport, "the report is truncated"},
		{"empty file", f.file("empty.csv"), reconcile.ErrInvalidReport, "empty.csv is empty (0 bytes)"},
		{"empty gzip", f.file("empty.csv.gz"), reconcile.ErrInvalidReport, "empty.csv.gz is empty"},
		{"header only of another report", f.file("other.csv", "id,value"), reconcile.ErrInvalidReport, `has no column "merchant"`},
	}
	for _, tc := range cases {
		audits := f.count("SELECT count(*) FROM idem.audit")
		batch := filepath.Join(f.dir, tc.name+".ndjson")
		sum, found, err := f.run(reconcile.Config{Mapping: settlementMapping(tc.report), EmitResolve: batch, Pin: true})
		assert.NoFileExists(t, batch, tc.name)
		assert.Zero(t, f.count("SELECT count(*) FROM idem.horizon_correction"), tc.name)
		left, _ := filepath.Glob(filepath.Join(f.dir, ".*partial"))
		assert.Empty(t, left, tc.name)
		if tc.wantErr != nil {
			require.ErrorIs(t, err, tc.wantErr, tc.name)
			assert.Contains(t, err.Error(), tc.message, tc.name)
			assert.Empty(t, found, tc.name)
			assert.Equal(t, audits, f.count("SELECT count(*) FROM idem.audit"), tc.name)
			continue
		}
		// A line that cannot be read is reported with its number; the run
		// goes on but emits and pins nothing.
		require.NoError(t, err, tc.name)
		assert.EqualValues(t, 1, sum.Counts[reconcile.Invalid], tc.name)
		assert.Contains(t, sum.Withheld, "nothing emitted or pinned", tc.name)
		for _, x := range found {
			if x.Status == reconcile.Invalid {
				assert.EqualValues(t, 3, x.Line)
				assert.Contains(t, x.Reason, tc.message)
			}
		}
	}
}

// NDJSON reports, gzipped, with JSON Pointers as columns and a fixed tenant;
// an identity recorded under another class is a mismatch on the class; a
// settlement of an operation recorded before the window is compared.
func TestNDJSONReportAndClassMismatch(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.smallLedger()
	dbtest.RegisterAppClass(t, f.dsn, "proj.view", "horizon")
	dbtest.Seed(t, f.dsn, "proj.view", "acme", "v-", 2, time.Hour, time.Minute)
	since := f.now().Add(-time.Minute)
	lines := []string{
		`{"ref":{"id":"p-1"},"money":{"minor":1000,"ccy":"EUR"}}`,
		`{"ref":{"id":"p-2"},"money":{"minor":2000.00,"ccy":"EUR"}}`,
		``,
		`{"ref":{"id":"p-3"},"money":{"minor":"3000","ccy":"EUR"}}`,
		`{"ref":{"id":"v-1"},"money":{"minor":1,"ccy":"EUR"}}`,
		`{"ref":{"id":"p-4"}}`,
		`not json`,
	}
	m := reconcile.Mapping{Class: "demo.transfer", Report: f.file("settlement.ndjson.gz", lines...), Tenant: "acme",
		Key: "operation_id=/ref/id", Compare: "/amount=/money/minor,/currency=/money/ccy", Since: since.Format(time.RFC3339Nano)}
	sum, found, err := f.run(reconcile.Config{Mapping: m})
	require.NoError(t, err)
	assert.True(t, sum.Report.Gzip)
	assert.Equal(t, reconcile.FormatNDJSON, sum.Report.Format)
	byOp := map[string]reconcile.Finding{}
	for _, x := range found {
		byOp[x.OperationID+"@"+string(rune('0'+x.Line))] = x
	}
	assert.Equal(t, map[reconcile.Status]int64{reconcile.Matched: 3, reconcile.Mismatch: 1,
		reconcile.Invalid: 2, reconcile.MissingInReport: 2}, sum.Counts, "%+v", found)
	v1 := byOp["v-1@5"]
	assert.Equal(t, reconcile.Mismatch, v1.Status)
	require.Len(t, v1.Differences, 1)
	assert.Equal(t, "class", v1.Differences[0].Field)
	assert.Equal(t, "proj.view", *v1.Differences[0].Inbox)
	assert.Contains(t, byOp["p-4@6"].Reason, "no /money/minor, /money/ccy on this line")
	assert.Equal(t, "not a JSON object", byOp["@7"].Reason)
	assert.Equal(t, reconcile.Totals{Inbox: "6000", Report: "6000.00"}, sum.Amounts[reconcile.Matched]["EUR"])
}

// A standby or a read-only session is refused before the report is read.
func TestRefusedOnReadOnlySession(t *testing.T) {
	t.Parallel()
	f := setup(t)
	u, err := url.Parse(f.dsn)
	require.NoError(t, err)
	if u.RawQuery != "" {
		u.RawQuery += "&"
	}
	u.RawQuery += "options=-c%20default_transaction_read_only%3Don"
	ro := dbtest.PoolAs(t, u.String(), dbtest.Operator, 2)
	report := f.file("settlement.csv", csvHeader)
	_, err = reconcile.Run(f.ctx, ro, reconcile.Config{Mapping: settlementMapping(report), Operator: "alice"}, nil)
	assert.ErrorIs(t, err, recovery.ErrNotPrimary)
}

// A mapping that cannot work is refused before anything is read.
func TestMappingErrors(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 2, 15, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		m    reconcile.Mapping
		want string
	}{
		{reconcile.Mapping{Report: "r.csv", Key: "tenant=a,operation_id=b"}, "a class is required"},
		{reconcile.Mapping{Class: "c", Key: "tenant=a,operation_id=b"}, "a report is required"},
		{reconcile.Mapping{Class: "c", Report: "r", Key: "tenant=a"}, "operation_id=COLUMN"},
		{reconcile.Mapping{Class: "c", Report: "r", Key: "operation_id=b"}, "or give a fixed --tenant"},
		{reconcile.Mapping{Class: "c", Report: "r", Key: "tenant=a,operation_id=b", Tenant: "t"}, "give the tenant once"},
		{reconcile.Mapping{Class: "c", Report: "r", Key: "tenant=a,operation_id=b", Compare: "amount=x"}, "not a JSON Pointer"},
		{reconcile.Mapping{Class: "c", Report: "r", Key: "tenant=a,operation_id=b", Compare: "/a=x,/a=y"}, "maps /a twice"},
		{reconcile.Mapping{Class: "c", Report: "r", Key: "tenant=a,operation_id=b", Since: "2026-11-02", Until: "2026-11-01"}, "is not before"},
		{reconcile.Mapping{Class: "c", Report: "r", Key: "tenant=a,operation_id=b", Since: "last week"}, "want a date"},
		{reconcile.Mapping{Class: "c", Report: "r", Key: "tenant=a,operation_id=b", Format: "xls"}, "use csv or ndjson"},
		{reconcile.Mapping{Class: "c", Report: "r", Key: "tenant=a,operation_id=b", Delimiter: ";;"}, "one character"},
	} {
		_, err := tc.m.Check(now)
		require.ErrorIs(t, err, reconcile.ErrInvalidMapping, tc.want)
		assert.Contains(t, err.Error(), tc.want)
	}
	p, err := reconcile.Mapping{Class: "c", Report: "r", Key: "tenant=a,operation_id=b", Since: "yesterday", Until: "today"}.Check(now)
	require.NoError(t, err)
	since, until := p.Window()
	assert.Equal(t, "2026-11-01T00:00:00Z", since.Format(time.RFC3339))
	assert.Equal(t, "2026-11-02T00:00:00Z", until.Format(time.RFC3339))
}

// A saved mapping reads like the command line; its report path is relative
// to the file; a typo in a field name is refused.
func TestSavedMappings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := reconcile.Mapping{Class: "demo.transfer", Report: "settlement.csv", Key: "tenant=merchant,operation_id=reference",
		Compare: "/amount=amount_minor", Since: "yesterday", Until: "today"}
	path := filepath.Join(dir, "psp.json")
	require.NoError(t, reconcile.SaveMapping(path, m, false))
	assert.ErrorContains(t, reconcile.SaveMapping(path, m, false), "exists")
	got, err := reconcile.LoadMapping(path)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "settlement.csv"), got.Report)
	assert.Equal(t, "psp", got.Name)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "typo.json"), []byte(`{"class":"c","comapre":"/a=b"}`), 0o600))
	list, err := reconcile.ListMappings(dir)
	require.NoError(t, err)
	require.Len(t, list, 2)
	assert.NoError(t, list[0].Err)
	assert.ErrorContains(t, list[1].Err, `unknown field "comapre"`)
	var raw map[string]any
	b, _ := os.ReadFile(path)
	require.NoError(t, json.Unmarshal(b, &raw))
	assert.Equal(t, "tenant=merchant,operation_id=reference", raw["key"])
	assert.False(t, errors.Is(err, reconcile.ErrInvalidMapping))
}

// A report of one tenant (a fixed Tenant) is compared with that tenant's
// operations only: the other tenants' operations of the class, in the same
// window, are neither reported, emitted nor pinned as missing_in_report.
func TestFixedTenantReadsOnlyThatTenant(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var trs []transfer
	for _, tenant := range []string{"acme", "globex", "shop1", "shop10"} {
		for i := 1; i <= 3; i++ {
			trs = append(trs, transfer{tenant: tenant, op: "p-" + string(rune('0'+i)), amount: int64(100 * i), currency: "EUR"})
		}
	}
	f.apply(trs...)
	report := f.file("shop1.csv", "reference,amount_minor,currency", "p-1,100,EUR", "p-2,200,EUR")
	batch := filepath.Join(f.dir, "missing.ndjson")
	m := reconcile.Mapping{Class: "demo.transfer", Report: report, Tenant: "shop1",
		Key: "operation_id=reference", Compare: "/amount=amount_minor,/currency=currency"}

	sum, found, err := f.run(reconcile.Config{Mapping: m, EmitResolve: batch, Pin: true})
	require.NoError(t, err)
	assert.Equal(t, map[reconcile.Status]int64{reconcile.Matched: 2, reconcile.MissingInReport: 1}, sum.Counts, "%+v", found)
	for _, x := range found {
		assert.Equal(t, "shop1", x.Tenant, "%+v", x)
	}
	assert.EqualValues(t, 1, sum.Emitted)
	assert.EqualValues(t, 1, sum.Pinned)
	body, err := os.ReadFile(batch)
	require.NoError(t, err)
	reqs := readBatch(t, body)
	require.Len(t, reqs, 1)
	assert.Equal(t, "shop1/p-3", reqs[0].Tenant+"/"+reqs[0].OperationID)
	assert.EqualValues(t, 0, f.count("SELECT count(*) FROM idem.horizon_correction WHERE tenant_id <> 'shop1'"))
	assert.EqualValues(t, 1, f.count("SELECT count(*) FROM idem.horizon_correction WHERE tenant_id = 'shop1' AND operation_id = 'p-3'"))
}

// A pin's reason keeps the report's whole SHA-256, even when its detail is
// longer than the database takes: the detail gives way.
func TestPinReasonKeepsTheWholeHash(t *testing.T) {
	t.Parallel()
	sha := strings.Repeat("0123456789abcdef", 4)
	rep := reconcile.ReportInfo{Name: "settlement.csv", SHA256: sha}
	short := reconcile.PinReason(reconcile.Finding{Status: reconcile.Invalid, Line: 4, Reason: "bad amount"}, rep)
	assert.Equal(t, "reconcile settlement.csv line 4: invalid: bad amount; report sha256:"+sha, short)
	long := reconcile.PinReason(reconcile.Finding{Status: reconcile.Invalid, Line: 4, Reason: strings.Repeat("much detail ", 1000)}, rep)
	assert.LessOrEqual(t, len(long), 4096)
	assert.True(t, strings.HasSuffix(long, "…; report sha256:"+sha), long[len(long)-100:])
}
