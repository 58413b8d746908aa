package governance_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/governance"
	"github.com/idemctl/idemctl/importer"
)

// An import plan sealed while its class moved no money, whose class became
// a money class after: the review says that (what happened), not "sealed
// on Citus, or by an older idemctl".
func TestImportPlanOfAClassThatBecameMoneySaysSo(t *testing.T) {
	t.Parallel()
	f := setup(t)
	path := filepath.Join(t.TempDir(), "store.ndjson")
	require.NoError(t, os.WriteFile(path, []byte(`{"tenant_id":"t1","operation_id":"k-1","payload":{"to":"bob","from":"alice","amount":900,"currency":"EUR"},`+
		`"response":{"ok":true},"created_at":"2026-11-01T10:00:00Z","status":"finished"}`+"\n"), 0o600))
	r, err := importer.Plan(f.ctx, f.alice, importer.File(path), importer.PlanOptions{Class: "demo.transfer", Operator: "alice",
		Reason: "adopt", Correction: "LC-1", Contract: "PSP-7"}, importer.Sinks{})
	require.NoError(t, err)
	require.True(t, r.Plan.Staged, "a plan of this database is staged")
	review, err := governance.ShowEntry(f.ctx, f.alice, r.Plan.ID)
	require.NoError(t, err)
	assert.Empty(t, review.MoneyProblems, "no money class when sealed, none now")
	_, err = governance.SetMoney(f.ctx, f.alice, "demo.transfer", charge, "alice", "")
	require.NoError(t, err)
	review, err = governance.ShowEntry(f.ctx, f.alice, r.Plan.ID)
	require.NoError(t, err)
	require.Len(t, review.MoneyProblems, 1)
	assert.Contains(t, review.MoneyProblems[0].Problem, "a money class now, not when the plan was sealed")
	assert.Empty(t, review.Totals)
}
