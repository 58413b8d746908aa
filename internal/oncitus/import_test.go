package oncitus_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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
	"github.com/idemctl/idemctl/quarantine"
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
	// A plan of the same rows whose planner forged a fingerprint (another
	// response for the first tenant's key): bob's approval reads the file
	// again and the coordinator refuses it, naming the item.
	var forged int64
	require.NoError(t, alice.QueryRow(ctx, "SELECT (idem.import_plan_begin($1, NULL, 'alice', 'adopt', NULL, 'the old store''s own ledger')).id",
		planned.Plan.Source).Scan(&forged))
	var fps [][]byte
	var ops, evidence []string
	var ats []time.Time
	for i, tenant := range tenants {
		payload := fmt.Sprintf(`{"amount":%d,"currency":"EUR","from":"alice","to":"bob"}`, i+1)
		response := fmt.Sprintf(`{"posting_id":"legacy-%d"}`, i)
		if i == 0 {
			response = `{"posting_id":"FORGED"}`
		}
		sum := sha256.Sum256([]byte(payload))
		fp := importer.Fingerprint(tenant, "old-1", "jcs-sha256:"+hex.EncodeToString(sum[:]), "", []byte(response), created)
		fps, ops, evidence, ats = append(fps, fp[:]), append(ops, "old-1"), append(evidence, fmt.Sprintf("imported from line %d", i+1)), append(ats, created)
	}
	_, err = alice.Exec(ctx, "SELECT idem.import_plan_add($1, $2, $3, $4, $5, $6, $7, $8)", forged, demo.Class, tenants, ops, evidence, ats,
		make([]*string, len(tenants)), fps)
	require.NoError(t, err)
	_, err = alice.Exec(ctx, "SELECT idem.import_plan_seal($1, $2, '{}', NULL)", forged, planned.Plan.SourceDigest)
	require.NoError(t, err)
	_, err = importer.Approve(ctx, bob, forged, "bob", open)
	require.ErrorIs(t, err, governance.ErrRefused, "a forged fingerprint is not approved")
	assert.Contains(t, err.Error(), "("+tenants[0]+", old-1) differs from the source's")

	_, err = importer.Approve(ctx, bob, planned.Plan.ID, "bob", open)
	require.NoError(t, err)
	done, err := importer.Run(ctx, alice, planned.Plan.ID, "alice", open)
	require.NoError(t, err)
	assert.Equal(t, "done", done.State)
	outcomes, err := importer.Outcomes(ctx, alice, planned.Plan.ID)
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"entered": len(tenants) - 2, "skipped": 1, "quarantined": 1}, outcomes)
	assert.EqualValues(t, 1, count(t, e.superuser(t), `SELECT count(*) FROM idem.quarantine WHERE tenant_id = $1 AND operation_id = 'old-1'
		AND status = 'open'`, tenants[1]), "another payload is quarantined with both sides")
	// That record keeps the old store's answer, and is never accepted as
	// new (the old store finished it): refused on the coordinator, nothing run.
	var qid int64
	require.NoError(t, alice.QueryRow(ctx, "SELECT id FROM idem.quarantine WHERE tenant_id = $1 AND operation_id = 'old-1'", tenants[1]).Scan(&qid))
	rec, err := quarantine.Show(ctx, alice, qid)
	require.NoError(t, err)
	require.NotNil(t, rec.Entered)
	assert.JSONEq(t, `{"posting_id":"legacy-1"}`, string(rec.Entered.OldStoreResponse))
	_, err = quarantine.AcceptAsNew(ctx, alice, qid, "old-1-rev2", "alice", "looks new")
	assert.ErrorIs(t, err, quarantine.ErrImportedFinished)
	_, err = quarantine.PlanAccept(ctx, alice, quarantine.Selection{IDs: []int64{qid}}, qid, "{operation_id}-rev2", 10, "alice", "bulk")
	assert.ErrorIs(t, err, quarantine.ErrImportedFinished)
	assert.EqualValues(t, 0, count(t, e.superuser(t), "SELECT count(*) FROM idem.identity WHERE operation_id LIKE 'old-1-rev%'"))

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
