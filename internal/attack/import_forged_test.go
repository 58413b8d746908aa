package attack_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/governance"
	"github.com/idemctl/idemctl/importer"
)

// The four eyes of an import bind its rows to its source (review F1). The
// planner (alice, an operator, with psql) stages six rows of which the
// sixth is forged (another amount and response), and seals the stage
// citing the honest file's digest, counts and cursor: the approval screen
// is the honest plan's. Bob approves as idemctl does, reading the honest
// file again: the database compares what the file gives with the stage
// (the seal's own digest) and refuses, naming row 6; nothing is approved
// and nothing can run. Neither can alice's forged fingerprints of the
// per-item design (Citus's, which off Citus any operator may use too) be
// approved, nor any import plan approved without reading its source (the
// record approval, or the import approval with no rows read). The honest
// plan of the same file is approved and enters the honest row 6.
//
// Fails on the code before idem.import_plan_approve (the forged plan is
// approved and its run enters amount 999999).
func TestImportApprovalRefusesAStageItsSourceDoesNotGive(t *testing.T) {
	t.Parallel()
	w := setup(t)
	at := time.Now().Add(-30 * 24 * time.Hour).UTC().Truncate(time.Microsecond)
	var b strings.Builder
	for i := 1; i <= 6; i++ {
		fmt.Fprintf(&b, `{"tenant_id":"t1","operation_id":"s-%d","payload":{"amount":%d},"response":{"ride_id":"r-%d"},"created_at":%q,"status":"finished"}`+"\n",
			i, i*100, i, at.Add(time.Duration(i)*time.Minute).Format(time.RFC3339Nano))
	}
	path := filepath.Join(t.TempDir(), "smuggle.ndjson")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
	file := importer.File(path)
	honest, err := importer.Plan(w.ctx, w.operator, file, importer.PlanOptions{Class: projClass, Operator: "alice", Reason: "adopt"}, importer.Sinks{})
	require.NoError(t, err)
	require.Equal(t, 6, honest.Plan.Items)
	require.NotNil(t, honest.Plan.Cursor)
	var sourceCounts string
	require.NoError(t, w.operator.QueryRow(w.ctx, "SELECT counts -> 'source' FROM idem.entry_plan WHERE id = $1", honest.Plan.ID).Scan(&sourceCounts))

	// Alice's forged stage, by hand, sealed with the honest plan's claims.
	tx, err := w.operator.Begin(w.ctx)
	require.NoError(t, err)
	var forged int64
	require.NoError(t, tx.QueryRow(w.ctx, "SELECT (idem.import_plan_begin($1, NULL, 'alice', 'adopt')).id", honest.Plan.Source).Scan(&forged))
	_, err = tx.Exec(w.ctx, "SELECT idem.import_plan_stage_open($1)", forged)
	require.NoError(t, err)
	for i := 1; i <= 6; i++ {
		payload, response := fmt.Sprintf(`{"amount":%d}`, i*100), fmt.Sprintf(`{"ride_id":"r-%d"}`, i)
		if i == 6 {
			payload, response = `{"amount":999999}`, `{"ride_id":"FORGED"}`
		}
		_, err = tx.Exec(w.ctx, fmt.Sprintf(`INSERT INTO idem.import_stage_%d (tenant_id, operation_id, payload, payload_hash, response, created_at, evidence)
			VALUES ('t1', $1, $2, $3, $4, $5, $6)`, forged), fmt.Sprintf("s-%d", i), payload, hashOf(payload), response,
			at.Add(time.Duration(i)*time.Minute), fmt.Sprintf("imported from line %d", i))
		require.NoError(t, err)
	}
	_, err = tx.Exec(w.ctx, "SELECT idem.import_plan_seal_stage($1, $2, $3::jsonb, $4, $5, 50000)", forged,
		honest.Plan.SourceDigest, sourceCounts, *honest.Plan.Cursor, projClass)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(w.ctx))
	var same bool
	require.NoError(t, w.operator.QueryRow(w.ctx, `SELECT a.source_digest = b.source_digest AND a.counts = b.counts AND a.sample = b.sample
		AND a.cursor = b.cursor FROM idem.entry_plan a, idem.entry_plan b WHERE a.id = $1 AND b.id = $2`, honest.Plan.ID, forged).Scan(&same))
	require.True(t, same, "the forged plan shows what the honest one shows (but its items digest)")

	before := w.snapshot()
	_, err = importer.Approve(w.ctx, w.second, forged, "bob", file)
	require.ErrorIs(t, err, governance.ErrRefused, "bob's approval reads the honest file: the stage is not what it gives")
	assert.Contains(t, err.Error(), "row 6 (t1, s-6) differs from the source's")
	assert.Contains(t, err.Error(), "nothing approved")
	// No way around the check for the second person either.
	_, err = w.second.Exec(w.ctx, "SELECT idem.entry_plan_approve($1, 'bob')", forged)
	assert.Equal(t, "IX341", code(err), "a record approval approves no import")
	_, err = w.second.Exec(w.ctx, "SELECT idem.import_plan_approve($1, 'bob')", forged)
	assert.Equal(t, "IX341", code(err), "no import approved without the rows read again")
	tx, err = w.second.Begin(w.ctx)
	require.NoError(t, err)
	_, err = tx.Exec(w.ctx, "SELECT idem.import_check_open($1)", forged)
	require.NoError(t, err)
	_, err = tx.Exec(w.ctx, "SELECT idem.import_plan_approve($1, 'bob')", forged)
	assert.Equal(t, "IX343", code(err), "nothing read: the plan's rows are not the source's")
	assert.Contains(t, err.Error(), "row 1 (t1, s-1) is in the plan, not in the source")
	_ = tx.Rollback(w.ctx)
	_, err = importer.Run(w.ctx, w.operator, forged, "alice", file)
	assert.ErrorIs(t, err, governance.ErrState, "not approved: nothing runs")
	var state string
	require.NoError(t, w.operator.QueryRow(w.ctx, "SELECT state FROM idem.entry_plan WHERE id = $1", forged).Scan(&state))
	assert.Equal(t, "planned", state)
	assert.Equal(t, before, w.snapshot(), "nothing approved, nothing written")

	// The per-item design: alice's forged fingerprint of row 6.
	var items int64
	require.NoError(t, w.operator.QueryRow(w.ctx, "SELECT (idem.import_plan_begin($1, NULL, 'alice', 'adopt')).id", honest.Plan.Source).Scan(&items))
	var tenants, ops, evidence []string
	var ats []time.Time
	var fps [][]byte
	for i := 1; i <= 6; i++ {
		payload, response := fmt.Sprintf(`{"amount":%d}`, i*100), fmt.Sprintf(`{"ride_id":"r-%d"}`, i)
		if i == 6 {
			payload, response = `{"amount":999999}`, `{"ride_id":"FORGED"}`
		}
		fp := importer.Fingerprint("t1", fmt.Sprintf("s-%d", i), hashOf(payload), "", []byte(response), at.Add(time.Duration(i)*time.Minute))
		tenants, ops, evidence = append(tenants, "t1"), append(ops, fmt.Sprintf("s-%d", i)), append(evidence, fmt.Sprintf("imported from line %d", i))
		ats, fps = append(ats, at.Add(time.Duration(i)*time.Minute)), append(fps, fp[:])
	}
	_, err = w.operator.Exec(w.ctx, "SELECT idem.import_plan_add($1, $2, $3, $4, $5, $6, $7, $8)", items, projClass,
		tenants, ops, evidence, ats, make([]*string, 6), fps)
	require.NoError(t, err)
	_, err = w.operator.Exec(w.ctx, "SELECT idem.import_plan_seal($1, $2, $3::jsonb, $4)", items, honest.Plan.SourceDigest, sourceCounts,
		*honest.Plan.Cursor)
	require.NoError(t, err)
	_, err = importer.Approve(w.ctx, w.second, items, "bob", file)
	require.ErrorIs(t, err, governance.ErrRefused, "a forged fingerprint is refused at the approval")
	assert.Contains(t, err.Error(), "(t1, s-6) differs from the source's")

	// The honest plan: approved by the same check, its row 6 enters as the file says.
	approved, err := importer.Approve(w.ctx, w.second, honest.Plan.ID, "bob", file)
	require.NoError(t, err)
	assert.Equal(t, "approved", approved.State)
	_, err = importer.Run(w.ctx, w.operator, honest.Plan.ID, "alice", file)
	require.NoError(t, err)
	var payload, response string
	require.NoError(t, w.operator.QueryRow(w.ctx, `SELECT b.payload, b.response::text FROM idem.inbox_body b
		WHERE b.tenant_id = 't1' AND b.operation_id = 's-6'`).Scan(&payload, &response))
	assert.Equal(t, `{"amount":600}`, payload)
	assert.Equal(t, `{"ride_id": "r-6"}`, response)
}
