package importer_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/importer"
)

// Every row is imported, listed as ambiguous or invalid, with the reason.
func TestClassify(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := now.Add(-time.Hour)
	row := func(change func(*importer.Row)) importer.Row {
		r := importer.Row{Ref: "row 1", Tenant: "t1", OperationID: "k1", Payload: []byte(`{"b":1, "a":2}`),
			Response: []byte(`{"ok":true}`), CreatedAt: &at, Status: "finished"}
		change(&r)
		return r
	}
	cases := []struct {
		name   string
		row    importer.Row
		kind   importer.Kind
		reason string
	}{
		{"finished", row(func(*importer.Row) {}), importer.Import, ""},
		{"unfinished", row(func(r *importer.Row) { r.Status = "ride_created" }), importer.Ambiguous, `unfinished in the old store (status "ride_created")`},
		{"locked", row(func(r *importer.Row) { r.Locked = true }), importer.Ambiguous, "still locked"},
		{"no response", row(func(r *importer.Row) { r.Response = nil }), importer.Ambiguous, "without a saved response"},
		{"NULL created_at", row(func(r *importer.Row) { r.CreatedAt = nil }), importer.Invalid, "created_at is NULL"},
		{"future created_at", row(func(r *importer.Row) { f := now.Add(time.Minute); r.CreatedAt = &f }), importer.Invalid, "in the future"},
		{"no tenant", row(func(r *importer.Row) { r.Tenant = "" }), importer.Invalid, "identity"},
		{"control character", row(func(r *importer.Row) { r.OperationID = "k\x07" }), importer.Invalid, "identity"},
		{"too long", row(func(r *importer.Row) { r.OperationID = strings.Repeat("k", 257) }), importer.Invalid, "identity"},
		{"over the limit", row(func(r *importer.Row) { r.Payload = []byte(`"` + strings.Repeat("x", 1<<20) + `"`) }), importer.Invalid, "payload"},
		{"not JSON", row(func(r *importer.Row) { r.Payload = []byte(`{"a":`) }), importer.Invalid, "payload"},
		{"response not JSON", row(func(r *importer.Row) { r.Response = []byte(`ok`) }), importer.Invalid, "response is not JSON"},
		{"hash only", row(func(r *importer.Row) { r.Payload = nil; r.RequestHash = `\x` + strings.Repeat("AB", 32) }), importer.Import, ""},
		{"bad hash", row(func(r *importer.Row) { r.Payload = nil; r.RequestHash = "abc" }), importer.Invalid, "64 hex"},
		{"unreadable", row(func(r *importer.Row) { r.Problem = "not a JSON object" }), importer.Invalid, "not a JSON object"},
		{"a JSON null response", row(func(r *importer.Row) { r.Response = []byte(" null ") }), importer.Ambiguous, "without a saved response"},
	}
	for _, c := range cases {
		v := importer.Classify(c.row, "rides.charge", now)
		assert.Equal(t, c.kind, v.Kind, c.name)
		assert.Contains(t, v.Reason, c.reason, c.name)
	}
	v := importer.Classify(cases[0].row, "rides.charge", now)
	assert.Equal(t, `{"a":2,"b":1}`, v.Item.Payload, "the canonical text")
	v = importer.Classify(cases[12].row, "rides.charge", now)
	assert.Equal(t, strings.Repeat("ab", 32), v.StoreHash)
}

func TestCursorRoundTrip(t *testing.T) {
	t.Parallel()
	c := importer.Cursor{At: time.Date(2026, 11, 30, 23, 59, 58, 123456000, time.UTC), Tenant: "a/b c", OperationID: "key/9001"}
	got, err := importer.ParseCursor(c.String())
	require.NoError(t, err)
	assert.Equal(t, c, got)
	assert.True(t, c.Before(importer.Cursor{At: c.At, Tenant: "a/b c", OperationID: "key/9002"}))
	_, err = importer.ParseCursor("2026-11-30")
	assert.Error(t, err)
}

// Invalid rows are lines with their reason; the rest of the file goes on.
func TestPlanWritesInvalidLinesAndGoesOn(t *testing.T) {
	t.Parallel()
	f := setup(t)
	rocketSetup(t, f)
	at := time.Now().Add(-48 * time.Hour).UTC().Format(time.RFC3339Nano)
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano)
	lines := `{"tenant_id":"t1","operation_id":"ok-1","payload":{"amount":1},"response":{"ok":true},"created_at":"` + at + `","status":"finished"}
{"tenant_id":"t1","operation_id":"null-at","payload":{"amount":2},"response":{"ok":true},"status":"finished"}
not json
{"tenant_id":"t1","operation_id":"future","payload":{"amount":3},"response":{"ok":true},"created_at":"` + future + `","status":"finished"}
{"tenant_id":"t1","operation_id":"ok-2","payload":{"amount":4},"response":{"ok":true},"created_at":"` + at + `","status":"finished"}
`
	path := t.TempDir() + "/store.ndjson"
	require.NoError(t, os.WriteFile(path, []byte(lines), 0o600))
	var invalid strings.Builder
	r, err := importer.Plan(f.ctx, f.alice, importer.File(path), importer.PlanOptions{Class: rideCharge, Correction: ridesLedger, Operator: "alice", Reason: "MIG-3"},
		importer.Sinks{Invalid: &invalid})
	require.NoError(t, err)
	assert.Equal(t, importer.Counts{Read: 5, ToImport: 2, Invalid: 3}, r.Counts)
	assert.Equal(t, 2, r.Plan.Items)
	out := invalid.String()
	assert.Contains(t, out, `"ref":"line 2","tenant":"t1","operation_id":"null-at","outcome":"invalid","reason":"created_at is NULL`)
	assert.Contains(t, out, `"ref":"line 3","outcome":"invalid","reason":"not a JSON object`)
	assert.Contains(t, out, `"operation_id":"future","outcome":"invalid","reason":"created_at `)
}
