package horizon_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/importer"
)

// An import enters by chunks, each its own transaction, and stays
// `running` between them (a stopped run resumes later); the purge plan's
// SHARE lock on idem.entry_plan does not hold a chunk off. The purge deletes
// by range (created_at < cutoff), not by the plan's candidates, so a chunk
// that commits after the plan, while the import is still running, would
// have its old bodies removed by a plan that never counted them and whose
// approver never saw them. idem.horizon_entered_after names a running
// import open at the plan's count once any of its chunks entered, and the
// purge refuses (IX316) with nothing deleted.
//
// Here: an import of 20 rows, 12 days old, in chunks of 10; chunk 0 enters,
// the purge plan (before 5 days) counts those 10 and bob approves it; chunk
// 1 enters; the purge runs. It stops (IX316) and leaves every body.
func TestPurgeRefusesWhatARunningImportEnteredAfterThePlan(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var b strings.Builder
	at := time.Now().Add(-12 * 24 * time.Hour).UTC()
	for i := range 20 {
		fmt.Fprintf(&b, `{"tenant_id":"t1","operation_id":"imp-%02d","payload":{"n":%d},"response":{"ok":%d},"created_at":%q,"status":"finished"}`+"\n",
			i, i, i, at.Add(time.Duration(i)*time.Second).Format(time.RFC3339Nano))
	}
	path := filepath.Join(t.TempDir(), "store.ndjson")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
	r, err := importer.Plan(f.ctx, f.pool, importer.File(path), importer.PlanOptions{Class: projClass, Operator: "alice", Reason: "adopt",
		ChunkRows: 10}, importer.Sinks{})
	require.NoError(t, err)
	_, err = importer.Approve(f.ctx, f.bob, r.Plan.ID, "bob", importer.File(path))
	require.NoError(t, err)

	// The run enters chunk 0, then stops (killed, a lost connection).
	f.exec("SELECT idem.import_run_begin($1, 'alice')", r.Plan.ID)
	f.exec("SELECT idem.import_run_chunk($1, 'alice', 0)", r.Plan.ID)
	p := f.approvedPlan()
	require.EqualValues(t, 10, p.Candidates, "the plan counts what entered so far")

	// The run resumes: chunk 1 enters after the plan counted its candidates.
	f.exec("SELECT idem.import_run_chunk($1, 'alice', 1)", r.Plan.ID)

	res, err := horizon.Purge(f.ctx, f.pool, p.ID, horizon.PurgeOptions{Operator: "alice"})
	t.Logf("purge: %v, aborted %v (%s), purged %d of %d candidates", err, res.Aborted, res.AbortReason, res.Purged, p.Candidates)
	assert.LessOrEqual(t, res.Purged, p.Candidates, "the purge removed more bodies than its plan counted")
	assert.True(t, res.Aborted, "the purge stops: a chunk entered after its plan counted")
	assert.EqualValues(t, 20, f.count("SELECT count(*) FROM idem.inbox_body WHERE tenant_id = 't1' AND operation_id LIKE 'imp-%'"),
		"nothing is deleted")
	assert.EqualValues(t, 10, f.count("SELECT count(*) FROM idem.inbox_body WHERE tenant_id = 't1' AND operation_id >= 'imp-10'"),
		"the bodies chunk 1 entered after the plan are kept")
}
