package importer_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/importer"
)

// A source that holds an identity twice (a query that joins the old store
// to something with two rows a key) is refused whole: a plan with an items
// digest keeps no row an item to refuse it at the plan, so its run does,
// and nothing enters; with the duplicate gone, the same keys import.
func TestImportSourceWithAnIdentityTwiceEntersNothing(t *testing.T) {
	t.Parallel()
	f := setup(t)
	rocketSetup(t, f)
	write := func(keys ...string) string {
		var b strings.Builder
		at := time.Now().Add(-10 * 24 * time.Hour).UTC()
		for i, key := range keys {
			fmt.Fprintf(&b, `{"tenant_id":"7","operation_id":%q,"payload":{"amount":%d},"response":{"ok":true},"created_at":%q,"status":"finished"}`+"\n",
				key, i, at.Add(time.Duration(i)*time.Minute).Format(time.RFC3339Nano))
		}
		path := filepath.Join(t.TempDir(), "store.ndjson")
		require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
		return path
	}
	run := func(path string) error {
		r, err := importer.Plan(f.ctx, f.alice, importer.File(path), importer.PlanOptions{Class: rideCharge, Correction: ridesLedger, Operator: "alice", Reason: "adopt"}, importer.Sinks{})
		require.NoError(t, err)
		_, err = importer.Approve(f.ctx, f.bob, r.Plan.ID, "bob", importer.File(path))
		require.NoError(t, err)
		_, err = importer.Run(f.ctx, f.alice, r.Plan.ID, "alice", func(context.Context, *importer.Cursor, bool) (importer.Source, error) {
			return importer.OpenNDJSON(path)
		})
		return err
	}
	err := run(write("a", "b", "a"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the source holds an identity twice")
	var n int
	require.NoError(t, f.alice.QueryRow(f.ctx, "SELECT count(*) FROM idem.identity WHERE tenant_id = '7'").Scan(&n))
	assert.Zero(t, n, "nothing entered")
	require.NoError(t, run(write("a", "b")))
	require.NoError(t, f.alice.QueryRow(f.ctx, "SELECT count(*) FROM idem.identity WHERE tenant_id = '7'").Scan(&n))
	assert.Equal(t, 2, n)
}
