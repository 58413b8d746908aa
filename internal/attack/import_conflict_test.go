package attack_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/importer"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/quarantine"
)

// An import of an identity the inbox already holds with another
// payload is "quarantined with both sides" (docs/import.md). The incoming
// side is an operation the old store says FINISHED: its effect ran there
// (the plan cites who wrote it, --correction). `quarantine accept-as-new`
// of that record "runs the incoming payload once under NEW" (docs/
// quarantine.md), by one person for a class that is not money: the effect
// the old service already applied runs a second time, here. Nothing on the
// record or the question says the incoming side was already applied, and
// the imported side's saved response (the old store's evidence of what it
// did) is kept nowhere.
//
// Expected: accept-as-new of an imported conflict does not run the effect
// (it is refused, or enters the identity under NEW without its effect
// through a four-eyes entry plan), and the record keeps the imported
// response.
func TestAcceptAsNewOfAnImportConflictRunsTheEffectAgain(t *testing.T) {
	t.Parallel()
	w := setup(t)
	const class = "import.transfer"
	dbtest.Admin(t, w.dsn, "SET ROLE "+dbtest.EffectRole+"; CREATE TABLE effects.import_posting (t text, o text, amount int)")
	dbtest.RegisterEffect(t, w.dsn, class, "forever", "import_post",
		"INSERT INTO effects.import_posting VALUES (t, o, (p->>'amount')::int) RETURNING jsonb_build_object('posted', amount)")

	// The new service applied t1/k-1 for 100.
	_, err := idem.Execute(w.ctx, w.app, idem.Command{Identity: idem.Identity{TenantID: "t1", OperationID: "k-1"}, Class: class, Payload: []byte(`{"amount":100}`)})
	require.NoError(t, err)

	// The old store finished t1/k-1 for 700 (its ledger posted it).
	path := filepath.Join(t.TempDir(), "old.ndjson")
	require.NoError(t, os.WriteFile(path, []byte(`{"tenant_id":"t1","operation_id":"k-1","payload":{"amount":700},"response":{"old_posting":"p-700"},"created_at":"2026-11-01T10:00:00Z","status":"finished"}`+"\n"), 0o600))
	file := importer.File(path)
	r, err := importer.Plan(w.ctx, w.operator, file, importer.PlanOptions{Class: class, Operator: "alice", Reason: "adopt",
		Correction: "posted by the old service's ledger"}, importer.Sinks{})
	require.NoError(t, err)
	_, err = importer.Approve(w.ctx, w.second, r.Plan.ID, "bob", file)
	require.NoError(t, err)
	_, err = importer.Run(w.ctx, w.operator, r.Plan.ID, "alice", file)
	require.NoError(t, err)

	ids := dbtest.Column[int64](t, w.auditor, "SELECT id FROM idem.quarantine WHERE tenant_id = 't1' AND operation_id = 'k-1'")
	require.Len(t, ids, 1, "the import conflict is quarantined")
	kept := dbtest.Column[bool](t, w.auditor, "SELECT to_jsonb(q)::text LIKE '%p-700%' FROM idem.quarantine q WHERE id = $1", ids[0])
	assert.True(t, kept[0], "the imported side's saved response (the old store's answer) is kept with the record")

	admin := dbtest.PoolAs(t, w.dsn, dbtest.Superuser, 1)
	before := dbtest.Column[int64](t, admin, "SELECT count(*) FROM effects.import_posting")
	_, err = quarantine.AcceptAsNew(w.ctx, w.operator, ids[0], "k-1-rev2", "alice", "take the old store's amount")
	t.Logf("accept-as-new: %v", err)
	after := dbtest.Column[int64](t, admin, "SELECT count(*) FROM effects.import_posting")
	assert.Equal(t, before[0], after[0], "accept-as-new of an imported conflict must not run an effect the old store already applied (it posted %d more)", after[0]-before[0])
}
