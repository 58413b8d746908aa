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

// rv finding: an import now enters by chunks, each its own transaction, and
// stays `running` between them (a stopped run resumes later). The guard
// that stops a purge from removing what an import entered after its plan
// counted, idem.horizon_entered_after, looks only at entry plans that are
// `done` (migrations/code/088_horizon_entered_after.sql: e.state = 'done'),
// and the purge deletes by range (created_at < cutoff,
// 095_horizon_purge_blocks.sql), not by the plan's candidates. So a chunk
// that commits after the purge plan, while the import is still running,
// has its old bodies purged: removed by a plan that never counted them and
// whose approver never saw them ("purge only what it covers").
//
// Here: an import of 20 rows, 12 days old, in chunks of 10; chunk 0 enters,
// the purge plan (before 5 days) counts those 10 and bob approves it; chunk
// 1 enters; the purge runs. It must stop (IX316) or leave chunk 1's bodies;
// it removes all 20.
func TestRVPurgeRemovesWhatARunningImportEnteredAfterThePlan(t *testing.T) {
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
	assert.EqualValues(t, 10, f.count("SELECT count(*) FROM idem.inbox_body WHERE tenant_id = 't1' AND operation_id >= 'imp-10'"),
		"the bodies chunk 1 entered after the plan are kept")
}
