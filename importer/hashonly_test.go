package importer_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/governance"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/importer"
)

// middlewareExport writes an HTTP middleware's store, (key, request_hash,
// status_code, headers, body, created_at), as the import's NDJSON: only its
// own hash of each request, no payload.
func middlewareExport(t *testing.T, rows map[string]string) string {
	var b strings.Builder
	at := time.Now().Add(-30 * 24 * time.Hour).UTC()
	for _, key := range []string{"k1", "k2"} {
		sum := sha256.Sum256([]byte(rows[key]))
		fmt.Fprintf(&b, `{"tenant_id":"shop","operation_id":%q,"request_hash":%q,"response":{"status":201,"headers":{"content-type":"application/json"},"body":{"charge":%q}},"created_at":%q,"status":"finished"}`+"\n",
			key, hex.EncodeToString(sum[:]), "ch_"+key, at.Format(time.RFC3339Nano))
		at = at.Add(time.Hour)
	}
	path := filepath.Join(t.TempDir(), "middleware.ndjson")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
	return path
}

func importFile(t *testing.T, f *fixture, path, hashFunction string) governance.EntryPlan {
	t.Helper()
	r, err := importer.Plan(f.ctx, f.alice, importer.File(path), importer.PlanOptions{Class: rideCharge, Correction: ridesLedger, Operator: "alice",
		Reason: "adopt the middleware store (MIG-2)", HashFunction: hashFunction}, importer.Sinks{})
	require.NoError(t, err)
	assert.Equal(t, importer.Counts{Read: 2, ToImport: 2, HashOnly: 2}, r.Counts)
	_, err = importer.Approve(f.ctx, f.bob, r.Plan.ID, "bob", importer.File(path))
	require.NoError(t, err)
	_, err = importer.Run(f.ctx, f.alice, r.Plan.ID, "alice", func(context.Context, *importer.Cursor, bool) (importer.Source, error) {
		return importer.OpenNDJSON(path)
	})
	require.NoError(t, err)
	return r.Plan
}

func diffNote(t *testing.T, f *fixture, id int64) string {
	var note string
	require.NoError(t, f.alice.QueryRow(f.ctx, "SELECT diff -> 0 ->> 'note' FROM idem.quarantine WHERE id = $1", id).Scan(&note))
	return note
}

// A store that kept only its own request hash: an imported identity is
// already_applied only when the import declared the store's hash function
// and the request matches under it; otherwise every retry is a quarantined
// conflict "imported without its payload". Never run again.
func TestImportHashOnlyStore(t *testing.T) {
	t.Parallel()
	f := setup(t)
	rocketSetup(t, f)

	t.Run("declared", func(t *testing.T) {
		// sha256-sorted-json: the hash of the canonical JSON, what a client
		// of idem.execute sends whatever its key order and spacing.
		path := middlewareExport(t, map[string]string{"k1": `{"amount":500,"currency":"usd"}`, "k2": `{"amount":700,"currency":"usd"}`})
		plan := importFile(t, f, path, importer.SHA256SortedJSON)
		res, err := idem.Execute(f.ctx, f.app, idem.Command{Identity: idem.Identity{TenantID: "shop", OperationID: "k1"},
			Class: rideCharge, Payload: []byte(`{ "currency" : "usd", "amount" : 500 }`)})
		require.NoError(t, err)
		assert.Equal(t, idem.AlreadyApplied, res.Outcome, "the request matches under the declared function")
		assert.JSONEq(t, `{"status":201,"headers":{"content-type":"application/json"},"body":{"charge":"ch_k1"}}`, string(res.Response))

		res, err = idem.Execute(f.ctx, f.app, idem.Command{Identity: idem.Identity{TenantID: "shop", OperationID: "k2"},
			Class: rideCharge, Payload: []byte(`{"amount":7000,"currency":"usd"}`)})
		require.NoError(t, err)
		require.Equal(t, idem.Conflict, res.Outcome, "another request")
		assert.Contains(t, diffNote(t, f, res.QuarantineID), "imported without its payload")
		assert.Contains(t, diffNote(t, f, res.QuarantineID), "sha256-sorted-json")
		origin, err := governance.Origin(f.ctx, f.alice, "shop", "k1")
		require.NoError(t, err)
		assert.Contains(t, origin, fmt.Sprintf("imported under entry plan %d", plan.ID))
	})

	t.Run("undeclared", func(t *testing.T) {
		payload := `{"amount":900,"currency":"eur"}`
		path := middlewareExport(t, map[string]string{"k1": payload, "k2": payload})
		path2 := filepath.Join(filepath.Dir(path), "other-tenant.ndjson")
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path2, bytes.ReplaceAll(raw, []byte(`"shop"`), []byte(`"shop2"`)), 0o600))
		importFile(t, f, path2, "")
		res, err := idem.Execute(f.ctx, f.app, idem.Command{Identity: idem.Identity{TenantID: "shop2", OperationID: "k1"},
			Class: rideCharge, Payload: []byte(payload)})
		require.NoError(t, err)
		require.Equal(t, idem.Conflict, res.Outcome, "even the same request: nothing says it is")
		assert.Contains(t, diffNote(t, f, res.QuarantineID), "imported without its payload")
		assert.Contains(t, diffNote(t, f, res.QuarantineID), "declared no hash function")
	})

	t.Run("raw", func(t *testing.T) {
		// sha256-raw: only the very bytes the store hashed match; a client
		// that canonicalises sends other bytes.
		raw := `{"currency": "usd",  "amount": 42}`
		path := middlewareExport(t, map[string]string{"k1": raw, "k2": raw})
		path2 := filepath.Join(filepath.Dir(path), "raw.ndjson")
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path2, bytes.ReplaceAll(b, []byte(`"shop"`), []byte(`"shop3"`)), 0o600))
		importFile(t, f, path2, importer.SHA256Raw)
		sum := sha256.Sum256([]byte(raw))
		var outcome string
		require.NoError(t, f.app.QueryRow(f.ctx, "SELECT outcome FROM idem.execute('shop3', 'k1', $1, $2, $3)",
			rideCharge, raw, "jcs-sha256:"+hex.EncodeToString(sum[:])).Scan(&outcome))
		assert.Equal(t, "already_applied", outcome, "the raw body, byte for byte")
		res, err := idem.Execute(f.ctx, f.app, idem.Command{Identity: idem.Identity{TenantID: "shop3", OperationID: "k2"},
			Class: rideCharge, Payload: []byte(raw)})
		require.NoError(t, err)
		assert.Equal(t, idem.Conflict, res.Outcome, "canonicalised bytes are not the raw body")
	})
	assert.Equal(t, 0, postings(t, f), "no retry ran an effect")
}
