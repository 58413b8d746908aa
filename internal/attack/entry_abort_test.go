package attack_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/governance"
	"github.com/idemctl/idemctl/importer"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// An import plan stages its rows in a table of the schema owner's
// (idem.import_stage_<plan>), dropped when its run is done. A plan that
// will not run ends by idem.entry_plan_abort: its stage is dropped with it,
// the audit says so, and nothing of it can be approved or run afterwards.
// Any person may end a plan (the approver rejecting it, the planner
// withdrawing it), with a reason; a service, an auditor or a login with no
// person cannot, and a running or done plan is not ended.
func TestAnAbortedImportPlanKeepsNoStageAndNeverRuns(t *testing.T) {
	t.Parallel()
	w := setup(t)
	path := filepath.Join(t.TempDir(), "store.ndjson")
	var b strings.Builder
	at := time.Now().Add(-10 * 24 * time.Hour).UTC()
	for i := range 3 {
		fmt.Fprintf(&b, `{"tenant_id":"t1","operation_id":"k-%d","payload":{"n":%d},"response":{"ok":true},"created_at":%q,"status":"finished"}`+"\n",
			i, i, at.Add(time.Duration(i)*time.Minute).Format(time.RFC3339Nano))
	}
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
	plan := func() int64 {
		r, err := importer.Plan(w.ctx, w.operator, importer.File(path), importer.PlanOptions{Class: projClass, Operator: "alice", Reason: "adopt"}, importer.Sinks{})
		require.NoError(t, err)
		require.True(t, r.Plan.Staged)
		return r.Plan.ID
	}
	stage := func(id int64) bool {
		var there bool
		require.NoError(t, w.operator.QueryRow(w.ctx, "SELECT to_regclass($1) IS NOT NULL", fmt.Sprintf("idem.import_stage_%d", id)).Scan(&there))
		return there
	}
	abort := "SELECT (idem.entry_plan_abort($1, $2, $3)).state"

	id := plan()
	require.True(t, stage(id), "a planned import keeps its stage until it runs or ends")
	unmapped := dbtest.PoolAs(t, w.dsn, dbtest.Unmapped, 1)
	before := w.snapshot()
	for name, c := range map[string]struct {
		pool          *pgxpool.Pool
		label, reason string
		code          string
	}{
		"a service":              {w.app, "svc", "no", "42501"},
		"an auditor":             {w.auditor, "audit", "no", "42501"},
		"a login with no person": {unmapped, "nobody", "no", "IX313"},
		"no reason":              {w.second, "bob", " ", "IX343"},
	} {
		_, err := c.pool.Exec(w.ctx, abort, id, c.label, c.reason)
		assert.Equal(t, c.code, code(err), name)
	}
	_, err := w.operator.Exec(w.ctx, "DROP TABLE "+fmt.Sprintf("idem.import_stage_%d", id))
	assert.Equal(t, "42501", code(err), "nobody but the owner drops a stage")
	assert.Equal(t, before, w.snapshot(), "nothing written")
	require.True(t, stage(id))

	// The approver rejects it: the plan ends and its stage is gone.
	var state string
	require.NoError(t, w.second.QueryRow(w.ctx, abort, id, "bob", "the source is the staging copy, not production").Scan(&state))
	assert.Equal(t, "aborted", state)
	assert.False(t, stage(id), "the aborted plan's stage is dropped")
	var details string
	require.NoError(t, w.auditor.QueryRow(w.ctx, "SELECT details FROM idem.audit WHERE action = 'entry.abort' AND target = $1",
		fmt.Sprintf("entry_plan:%d", id)).Scan(&details))
	assert.JSONEq(t, `{"kind": "import", "state_before": "planned", "reason": "the source is the staging copy, not production",
		"person": "bob", "stage_dropped": true, "stage_rows": 3}`, details)

	after := w.snapshot()
	_, err = w.second.Exec(w.ctx, "SELECT idem.entry_plan_approve($1, 'bob')", id)
	assert.Equal(t, "IX341", code(err), "an aborted plan is approved no more")
	_, err = w.operator.Exec(w.ctx, "SELECT idem.import_run_begin($1, 'alice')", id)
	assert.Equal(t, "IX341", code(err), "nor run")
	_, err = importer.Run(w.ctx, w.operator, id, "alice", func(context.Context, *importer.Cursor, bool) (importer.Source, error) {
		return importer.OpenNDJSON(path)
	})
	assert.ErrorIs(t, err, governance.ErrState)
	assert.ErrorContains(t, err, "aborted")
	_, err = w.second.Exec(w.ctx, abort, id, "bob", "again")
	assert.Equal(t, "IX341", code(err), "an aborted plan ends once")
	assert.Equal(t, after, w.snapshot(), "nothing entered, nothing written")

	// Approved, then withdrawn by its planner: the stage goes too.
	id = plan()
	_, err = importer.Approve(w.ctx, w.second, id, "bob", importer.File(path))
	require.NoError(t, err)
	require.NoError(t, w.operator.QueryRow(w.ctx, abort, id, "alice", "cutover postponed").Scan(&state))
	assert.Equal(t, "aborted", state)
	assert.False(t, stage(id))

	// A plan that ran is over: it is not aborted.
	id = plan()
	_, err = importer.Approve(w.ctx, w.second, id, "bob", importer.File(path))
	require.NoError(t, err)
	_, err = importer.Run(w.ctx, w.operator, id, "alice", func(context.Context, *importer.Cursor, bool) (importer.Source, error) {
		return importer.OpenNDJSON(path)
	})
	require.NoError(t, err)
	_, err = w.second.Exec(w.ctx, abort, id, "bob", "too late")
	assert.Equal(t, "IX341", code(err), "a done plan is not aborted")
}
