package importer_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/importer"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/quarantine"
)

// A conflict an import made has the old store's finished operation as its
// incoming side: the record keeps the old store's answer (shown), and no
// path accepts it as a new operation (the database refuses it, IX128,
// whoever asks, before anything runs), since that would charge twice.
// Rejecting it works.
func TestImportedConflictKeepsTheAnswerAndNeverRunsAsNew(t *testing.T) {
	t.Parallel()
	f := setup(t)
	rocketSetup(t, f)
	// The new service charged k-1 itself, another amount, before the import.
	res, err := idem.Execute(f.ctx, f.app, idem.Command{Identity: idem.Identity{TenantID: "7", OperationID: "k-1"},
		Class: rideCharge, Payload: []byte(`{"amount":5}`)})
	require.NoError(t, err)
	require.Equal(t, idem.Applied, res.Outcome)
	path := filepath.Join(t.TempDir(), "store.ndjson")
	at := time.Now().Add(-48 * time.Hour).UTC().Format(time.RFC3339Nano)
	require.NoError(t, os.WriteFile(path, []byte(fmt.Sprintf(
		`{"tenant_id":"7","operation_id":"k-1","payload":{"amount":900},"response":{"charge":"ch_old","status":"succeeded"},"created_at":%q,"status":"finished"}`+"\n"+
			`{"tenant_id":"7","operation_id":"k-2","payload":{"amount":7},"response":{"charge":"ch_2"},"created_at":%q,"status":"finished"}`+"\n",
		at, at)), 0o600))
	plan := planFile(t, f, path, 10)
	_, err = importer.Run(f.ctx, f.alice, plan.ID, "alice", func(context.Context, *importer.Cursor, bool) (importer.Source, error) {
		return importer.OpenNDJSON(path)
	})
	require.NoError(t, err)
	outcomes, err := importer.Outcomes(f.ctx, f.alice, plan.ID)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"entered": 1, "quarantined": 1}, outcomes)
	posted := postings(t, f)
	var qid int64
	require.NoError(t, f.alice.QueryRow(f.ctx, "SELECT id FROM idem.quarantine WHERE tenant_id = '7' AND operation_id = 'k-1'").Scan(&qid))

	rec, err := quarantine.Show(f.ctx, f.alice, qid)
	require.NoError(t, err)
	require.NotNil(t, rec.Entered, "the record says its incoming side was imported")
	assert.Equal(t, plan.ID, rec.Entered.EntryPlan)
	assert.JSONEq(t, `{"charge":"ch_old","status":"succeeded"}`, string(rec.Entered.OldStoreResponse), "the old store's answer is kept")
	auditor := dbtest.PoolAs(t, f.dsn, dbtest.Auditor, 1)
	rec, err = quarantine.Show(f.ctx, auditor, qid)
	require.NoError(t, err)
	require.NotNil(t, rec.Entered, "an auditor sees it too")

	refused := func(t *testing.T, err error) {
		t.Helper()
		require.ErrorIs(t, err, quarantine.ErrImportedFinished)
		var pgErr *pgconn.PgError
		require.True(t, errors.As(err, &pgErr))
		assert.Equal(t, "IX128", pgErr.Code)
		assert.Contains(t, err.Error(), fmt.Sprintf("entry plan %d", plan.ID))
		assert.Contains(t, err.Error(), fmt.Sprintf("idemctl quarantine reject %d", qid))
	}
	_, err = quarantine.AcceptAsNew(f.ctx, f.alice, qid, "k-1-rev2", "alice", "looks new")
	refused(t, err)
	_, err = quarantine.PlanAcceptOne(f.ctx, f.alice, qid, "k-1-rev2", "alice", "looks new")
	require.ErrorIs(t, err, quarantine.ErrImportedFinished, "nor as a plan another person would approve")
	_, err = quarantine.PlanAccept(f.ctx, f.alice, quarantine.Selection{IDs: []int64{qid}}, qid, "{operation_id}-rev2", 10, "alice", "bulk")
	require.ErrorIs(t, err, quarantine.ErrImportedFinished)
	// The function every accept path runs refuses it too (a plan made
	// before the refusal existed): as the schema owner, the only caller.
	_, err = dbtest.PoolAs(t, f.dsn, dbtest.Superuser, 1).Exec(f.ctx, `SELECT idem.quarantine_accept_record(q, 'k-1-rev3', 'root', 'r', NULL)
		FROM idem.quarantine q WHERE q.id = $1`, qid)
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "%v", err)
	assert.Equal(t, "IX128", pgErr.Code)

	assert.Equal(t, posted, postings(t, f), "nothing ran")
	var n int
	require.NoError(t, f.alice.QueryRow(f.ctx, "SELECT count(*) FROM idem.identity WHERE operation_id LIKE 'k-1-rev%'").Scan(&n))
	assert.Zero(t, n, "no new identity")
	rec, err = quarantine.Reject(f.ctx, f.alice, qid, "alice", "the old store charged it: ch_old")
	require.NoError(t, err)
	assert.Equal(t, quarantine.StatusRejected, rec.Status)
}
