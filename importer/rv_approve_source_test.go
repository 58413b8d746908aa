package importer_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/importer"
)

// rv finding: `import approve` is documented to read "the plan's source
// again (the same flags as the plan)", says "the N rows its source gives are
// the plan's", and writes "checked_against_source": true. But it never
// compares the source the approver was handed with the plan's: neither its
// name nor its digest (the plan keeps both; the Citus run compares an NDJSON
// file's digest, run.go, the approval does not, approve.go). So the approval
// binds the stage to whatever file, DSN or query the approver typed, not to
// the source its screen shows. A planner who stages rows with psql citing an
// honest source (import.md says this is possible and that the approval is
// what stops it) has them approved by handing the approver a file (or a DSN,
// or a --query, which no plan records) that gives those rows.
//
// Here: the plan is of file A; the approver is handed file B, another file
// (its sha256 is not the plan's source digest) whose rows to import happen
// to be the staged ones. The approval must refuse a source that is not the
// plan's; it approves.
func TestRVImportApproveIsNotBoundToThePlansSource(t *testing.T) {
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
	assert.Error(t, err, "plan %d is of source %q (digest %s); the approval read another file and approved it",
		r.Plan.ID, r.Plan.Source, r.Plan.SourceDigest)
	assert.Equal(t, "planned", stateOf(t, f, r.Plan.ID), "nothing approved from a source that is not the plan's")
}
