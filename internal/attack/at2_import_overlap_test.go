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

	"github.com/idemctl/idemctl/importer"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// --since with the default overlap, when a row of the old
// store commits after the first import read it, stamped before the cursor
// (PostgreSQL's now() is the transaction's start). docs/import.md: such a
// row "is not lost" when it is within --since-overlap (24h); one older than
// the overlap is missed (documented). The rerun must enter the late row,
// skip what is in, and enter the new one.
func TestAt2SinceOverlapTakesALateCommit(t *testing.T) {
	t.Parallel()
	w := setup(t)
	now := time.Now().UTC().Truncate(time.Microsecond)
	row := func(op string, age time.Duration) string {
		return fmt.Sprintf(`{"tenant_id":"t1","operation_id":%q,"payload":{"amount":1},"response":{"ok":%q},"created_at":%q,"status":"finished"}`+"\n",
			op, op, now.Add(-age).Format(time.RFC3339Nano))
	}
	first := row("a-1", 3*time.Hour) + row("a-2", 2*time.Hour) + row("a-3", time.Hour)
	dir := t.TempDir()
	run := func(name, body string, since *importer.Cursor) importer.Result {
		t.Helper()
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
		file := importer.File(path)
		r, err := importer.Plan(w.ctx, w.operator, file, importer.PlanOptions{Class: projClass, Operator: "alice", Reason: "adopt", Since: since, SinceOverlap: importer.DefaultSinceOverlap}, importer.Sinks{})
		require.NoError(t, err)
		_, err = importer.Approve(w.ctx, w.second, r.Plan.ID, "bob", file)
		require.NoError(t, err)
		_, err = importer.Run(w.ctx, w.operator, r.Plan.ID, "alice", file)
		require.NoError(t, err)
		return r
	}
	r1 := run("first.ndjson", first, nil)
	require.NotNil(t, r1.Cursor)
	t.Logf("cursor %s", r1.Cursor)
	// Committed after the first read: one stamped 90 minutes ago (before the
	// cursor, within the overlap), one 30 hours ago (beyond it), one new.
	second := first + row("late-90m", 90*time.Minute) + row("late-30h", 30*time.Hour) + row("new", 10*time.Minute)
	r2 := run("second.ndjson", second, r1.Cursor)
	t.Logf("rerun counts %+v", r2.Counts)
	in := dbtest.Column[string](t, w.auditor, "SELECT operation_id FROM idem.identity WHERE tenant_id = 't1' ORDER BY 1")
	t.Logf("in the inbox: %s", strings.Join(in, " "))
	assert.Contains(t, in, "late-90m", "a row stamped before the cursor, committed late, within the overlap, is imported by the rerun")
	assert.Contains(t, in, "new")
	assert.NotContains(t, in, "late-30h", "beyond the overlap: missed, as documented (set --since-overlap past the longest transaction)")
}
