package attack_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/governance"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/importer"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// docs/import.md's table says an identity the inbox already
// holds with another payload is "quarantined with both sides", and that
// "refused" means "a pending claim or an open quarantine record". A row of a
// hash-only store (request_hash, no payload) for an identity the inbox holds
// with another hash is neither: idem.import_run_chunk writes it 'refused'
// ("a hash-only item cannot be shown as a conflict's incoming side"), no
// quarantine record keeps the evidence (the old store finished this key
// with another request), and `import run` prints only "refused 1": no row is
// named (`record show N` of an import lists no entries), so the operator is
// told the documented meaning of "refused", which is not what happened.
func TestHashOnlyImportConflictIsRefusedSilently(t *testing.T) {
	t.Parallel()
	w := setup(t)
	_, err := idem.ExecuteFunc(w.ctx, w.app, idem.Command{Identity: idem.Identity{TenantID: "t1", OperationID: "k-1"},
		Class: projClass, Payload: []byte(`{"n":1}`)}, func(context.Context, pgx.Tx) (json.RawMessage, error) { return json.RawMessage(`{"ok":true}`), nil })
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "hashonly.ndjson")
	require.NoError(t, os.WriteFile(path, []byte(`{"tenant_id":"t1","operation_id":"k-1","request_hash":"`+
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"+`","response":{"old":1},"created_at":"2026-11-01T10:00:00Z","status":"finished"}`+"\n"), 0o600))
	file := importer.File(path)
	r, err := importer.Plan(w.ctx, w.operator, file, importer.PlanOptions{Class: projClass, Operator: "alice", Reason: "adopt"}, importer.Sinks{})
	require.NoError(t, err)
	_, err = importer.Approve(w.ctx, w.second, r.Plan.ID, "bob", file)
	require.NoError(t, err)
	_, err = importer.Run(w.ctx, w.operator, r.Plan.ID, "alice", file)
	require.NoError(t, err)
	out, err := importer.Outcomes(w.ctx, w.operator, r.Plan.ID)
	require.NoError(t, err)
	t.Logf("outcomes %v", out)
	assert.Equal(t, 0, out["refused"], "no pending claim and no open quarantine record: 'refused' is not the documented case")
	// Not a quarantine record: a quarantine
	// record's incoming side is a payload (NOT NULL, its jcs-sha256 checked
	// by the table, and accept-as-new runs it), which a hash-only row does
	// not have: the row gets its own outcome, and the plan's item row is
	// the evidence of the store's side (its hash, created_at, evidence and
	// fingerprint), listed by record show.
	assert.Equal(t, 1, out["conflict_hash_only"])
	kept := dbtest.Column[string](t, w.auditor, `SELECT encode(store_hash, 'hex') || ' ' || created_at::text FROM idem.entry_item
		WHERE tenant_id = 't1' AND operation_id = 'k-1' AND outcome = 'conflict_hash_only'`)
	require.Len(t, kept, 1, "the store's side is kept on the plan's item row")
	assert.Contains(t, kept[0], "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa 2026-11-01")
	review, err := governance.ShowEntry(w.ctx, w.operator, r.Plan.ID)
	require.NoError(t, err)
	require.Len(t, review.Entries, 1, "record show of the import names the row that did not enter")
	assert.Equal(t, "k-1", review.Entries[0].OperationID)
	assert.Equal(t, "conflict_hash_only", review.Entries[0].Outcome)
	assert.Equal(t, 1, review.NotEntered)
	stored := dbtest.Column[string](t, w.auditor, "SELECT payload FROM idem.inbox_body WHERE tenant_id = 't1' AND operation_id = 'k-1'")
	assert.Equal(t, []string{`{"n":1}`}, stored, "the inbox's side is left as it was")
}
