package importer_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/importer"
)

// `import approve` reads "the plan's source again (the same flags as the
// plan)" and says "the N rows its source gives are the plan's": the source
// the approver is handed must be the plan's (a file: its digest; a
// database: the one the plan names), not another that gives the staged
// rows. Else a planner who stages rows with psql citing an honest source
// has them approved by handing the approver a file (or a DSN, or a
// --query) that gives those rows.
//
// Here: the plan is of file A; the approver is handed file B, another file
// (its sha256 is not the plan's source digest) whose rows to import are the
// staged ones. The approval refuses it (ErrSourceChanged) and approves
// nothing.
func TestImportApproveIsBoundToThePlansSource(t *testing.T) {
	t.Parallel()
	f := setup(t)
	rocketSetup(t, f)
	planned := storeFile(t, 3)
	r, err := importer.Plan(f.ctx, f.alice, importer.File(planned), importer.PlanOptions{Class: rideCharge, Correction: ridesLedger,
		Operator: "alice", Reason: "adopt"}, importer.Sinks{})
	require.NoError(t, err)

	raw, err := os.ReadFile(planned)
	require.NoError(t, err)
	other := filepath.Join(t.TempDir(), "other.ndjson")
	// Another source: the same finished rows and one unfinished row (not
	// imported), so another digest.
	require.NoError(t, os.WriteFile(other, append(raw,
		[]byte(`{"tenant_id":"7","operation_id":"zz-unfinished","payload":{"amount":1},"response":null,"created_at":"2020-01-01T00:00:00Z","status":"started"}`+"\n")...), 0o600))

	_, err = importer.Approve(f.ctx, f.bob, r.Plan.ID, "bob", importer.File(other))
	assert.ErrorIs(t, err, importer.ErrSourceChanged, "plan %d is of source %q (digest %s); the approval read another file and approved it",
		r.Plan.ID, r.Plan.Source, r.Plan.SourceDigest)
	assert.Equal(t, "planned", stateOf(t, f, r.Plan.ID), "nothing approved from a source that is not the plan's")
}
