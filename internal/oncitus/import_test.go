package oncitus_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/demo"
	"github.com/idemctl/idemctl/governance"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/importer"
)

// TestImportOnTheCoordinator: an existing store's NDJSON export, with
// tenants on both workers, planned by one operator, approved by another
// person and run on the coordinator (its stage is a coordinator temporary
// table, its identities and bodies go to the workers): every imported key
// retried through idem.execute is already_applied with the saved response
// and runs no effect, and keeps its original age.
func TestImportOnTheCoordinator(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	app := e.conn(t, loginApp)
	alice, bob := e.pool(t, loginOperator, 2), e.pool(t, loginOperator2, 2)
	tenants := e.spread(t, e.superuser(t), "import", 2)
	created := time.Now().Add(-40 * 24 * time.Hour).UTC().Truncate(time.Microsecond)
	var lines []string
	for i, tenant := range tenants {
		payload := fmt.Sprintf(`{"from":"alice","to":"bob","amount":%d,"currency":"EUR"}`, i+1)
		line, err := json.Marshal(map[string]any{"tenant_id": tenant, "operation_id": "old-1", "payload": json.RawMessage(payload),
			"response": json.RawMessage(fmt.Sprintf(`{"posting_id":"legacy-%d"}`, i)), "created_at": created, "status": "finished"})
		require.NoError(t, err)
		lines = append(lines, string(line))
	}
	// The new service already executed two of the keys: one with the same
	// request (skipped), one with another (quarantined, both kept).
	held := func(i, amount int) {
		res, err := idem.Execute(ctx, app, idem.Command{Identity: idem.Identity{TenantID: tenants[i], OperationID: "old-1"}, Class: demo.Class,
			Payload: []byte(fmt.Sprintf(`{"from":"alice","to":"bob","amount":%d,"currency":"EUR"}`, amount))})
		require.NoError(t, err)
		require.Equal(t, idem.Applied, res.Outcome)
	}
	held(0, 1)
	held(1, 99)
	file := filepath.Join(t.TempDir(), "store.ndjson")
	require.NoError(t, os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
	open := func(context.Context, *importer.Cursor, bool) (importer.Source, error) {
		return importer.OpenNDJSON(file)
	}

	planned, err := importer.Plan(ctx, alice, open, importer.PlanOptions{Class: demo.Class, Correction: "the old store's own ledger", Operator: "alice", Reason: "adopt the old store"},
		importer.Sinks{Ambiguous: &strings.Builder{}, Invalid: &strings.Builder{}})
	require.NoError(t, err)
	require.Equal(t, len(tenants), planned.Plan.Items)
	_, err = governance.ApproveEntry(ctx, bob, planned.Plan.ID, "bob")
	require.NoError(t, err)
	done, err := importer.Run(ctx, alice, planned.Plan.ID, "alice", open)
	require.NoError(t, err)
	assert.Equal(t, "done", done.State)
	outcomes, err := importer.Outcomes(ctx, alice, planned.Plan.ID)
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"entered": len(tenants) - 2, "skipped": 1, "quarantined": 1}, outcomes)
	assert.EqualValues(t, 1, count(t, e.superuser(t), `SELECT count(*) FROM idem.quarantine WHERE tenant_id = $1 AND operation_id = 'old-1'
		AND status = 'open'`, tenants[1]), "another payload is quarantined with both sides")

	for i, tenant := range tenants[2:] {
		i += 2
		res, err := idem.Execute(ctx, app, idem.Command{Identity: idem.Identity{TenantID: tenant, OperationID: "old-1"}, Class: demo.Class,
			Payload: []byte(fmt.Sprintf(`{"currency":"EUR", "amount":%d, "to":"bob", "from":"alice"}`, i+1))})
		require.NoError(t, err, tenant)
		assert.Equal(t, idem.AlreadyApplied, res.Outcome, tenant)
		assert.JSONEq(t, fmt.Sprintf(`{"posting_id":"legacy-%d"}`, i), string(res.Response), tenant)
		assert.EqualValues(t, 0, count(t, e.superuser(t), "SELECT count(*) FROM demo.posting WHERE tenant_id = $1", tenant), "no effect ran")
		var at time.Time
		require.NoError(t, e.superuser(t).QueryRow(ctx, "SELECT created_at FROM idem.identity WHERE tenant_id = $1 AND operation_id = 'old-1'", tenant).Scan(&at))
		assert.WithinDuration(t, created, at, time.Millisecond, "the imported key keeps its age")
	}

	// A plan that will not run ends (no stage on Citus: its items are rows
	// on the coordinator); its run is refused.
	again, err := importer.Plan(ctx, alice, open, importer.PlanOptions{Class: demo.Class, Correction: "the old store's own ledger", Operator: "alice", Reason: "once more"},
		importer.Sinks{Ambiguous: &strings.Builder{}, Invalid: &strings.Builder{}})
	require.NoError(t, err)
	aborted, err := governance.AbortEntry(ctx, bob, again.Plan.ID, "bob", "imported already")
	require.NoError(t, err)
	assert.Equal(t, "aborted", aborted.State)
	_, err = importer.Run(ctx, alice, again.Plan.ID, "alice", open)
	assert.ErrorIs(t, err, governance.ErrState)
}
