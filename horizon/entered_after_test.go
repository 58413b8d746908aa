package horizon_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/importer"
)

// importOld enters (tenant t1, op) of class proj.view through an import plan
// of alice's that bob approves and alice runs, with created_at at, as an
// import of an existing store keeps its items' original times. Returns the
// import's entry plan.
func (f *fixture) importOld(op string, at time.Time) int64 {
	f.t.Helper()
	payload, response := `{"amount":5}`, `{"ok":true}`
	sum := sha256.Sum256([]byte(payload))
	hash := idem.HashPrefix + hex.EncodeToString(sum[:])
	var id int64
	require.NoError(f.t, f.pool.QueryRow(f.ctx, "SELECT (idem.import_plan_begin('store', NULL, 'alice', 'adopt')).id").Scan(&id))
	fp := importer.Fingerprint("t1", op, hash, "", []byte(response), at)
	f.exec("SELECT idem.import_plan_add($1, $2, $3, $4, $5, $6, $7, $8)", id, projClass,
		[]string{"t1"}, []string{op}, []string{"row 1"}, []time.Time{at}, []*string{nil}, [][]byte{fp[:]})
	f.exec("SELECT idem.import_plan_seal($1, $2, '{}', NULL)", id, "sha256:"+strings.Repeat("cd", 32))
	// bob approves it as idemctl import approve does: the row read again
	check, err := f.bob.Begin(f.ctx)
	require.NoError(f.t, err)
	defer func() { _ = check.Rollback(f.ctx) }()
	_, err = check.Exec(f.ctx, "SELECT idem.import_check_open($1)", id)
	require.NoError(f.t, err)
	_, err = check.Exec(f.ctx, "INSERT INTO pg_temp.idem_import_check VALUES ('t1', $1, $2, $3, $4, NULL, 'row 1')",
		op, hash, response, at)
	require.NoError(f.t, err)
	_, err = check.Exec(f.ctx, "SELECT idem.import_plan_approve($1, 'bob')", id)
	require.NoError(f.t, err)
	require.NoError(f.t, check.Commit(f.ctx))
	tx, err := f.pool.Begin(f.ctx)
	require.NoError(f.t, err)
	defer func() { _ = tx.Rollback(f.ctx) }()
	_, err = tx.Exec(f.ctx, "SELECT idem.import_stage_open($1)", id)
	require.NoError(f.t, err)
	_, err = tx.Exec(f.ctx, "INSERT INTO pg_temp.idem_import_stage VALUES ('t1', $1, $2, $3, $4, $5, NULL, 'row 1')",
		op, payload, hash, response, at)
	require.NoError(f.t, err)
	_, err = tx.Exec(f.ctx, "SELECT idem.entry_plan_run($1, 'alice')", id)
	require.NoError(f.t, err)
	require.NoError(f.t, tx.Commit(f.ctx))
	return id
}

// approvedPlan is a purge plan of proj.view before 5 days ago, alice's,
// approved by bob.
func (f *fixture) approvedPlan() horizon.Plan {
	f.t.Helper()
	p, err := horizon.MakePlan(f.ctx, f.pool, horizon.PlanOptions{Class: projClass, Before: time.Now().Add(-5 * 24 * time.Hour),
		Operator: "alice", AcceptUnbounded: true})
	require.NoError(f.t, err)
	_, err = horizon.Approve(f.ctx, f.bob, p.ID, "bob")
	require.NoError(f.t, err)
	return p
}

// An import that runs while a purge is under way, between two of its
// transactions, enters a body the plan never counted into its range: the next
// transaction sees it and the database refuses it (IX316, rolled back), and
// the purge ends aborted, naming the import, with the imported body kept and
// no more removed than the plan counted.
func TestPurgeStopsAtAnImportThatEnteredItsRangeMeanwhile(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.seed(projClass, "t1", "old-", 300, 15*24*time.Hour, 30*time.Minute)
	p := f.approvedPlan()
	require.EqualValues(t, 300, p.Candidates)

	var entry int64
	res, err := horizon.Purge(f.ctx, f.pool, p.ID, horizon.PurgeOptions{Operator: "alice", BatchRows: 20, KeepRatio: -1,
		Progress: func(done, total int64) {
			if entry == 0 {
				entry = f.importOld("imported-1", time.Now().Add(-12*24*time.Hour))
			}
		}})
	require.NoError(t, err)
	require.NotZero(t, entry, "the purge ran at least one transaction")
	assert.True(t, res.Aborted, "the purge goes on past an import into its range")
	assert.Contains(t, res.AbortReason, "entry plan "+strconv.FormatInt(entry, 10))
	assert.Equal(t, horizon.StateAborted, res.Plan.State)
	assert.Less(t, res.Purged, p.Candidates, "it stopped at the import")
	assert.Equal(t, res.Purged, res.Plan.Purged)
	assert.EqualValues(t, 1, f.count("SELECT count(*) FROM idem.inbox_body WHERE tenant_id = 't1' AND operation_id = 'imported-1'"),
		"the imported identity keeps its saved response")
	assert.EqualValues(t, 300-res.Purged, f.count("SELECT count(*) FROM idem.inbox_body WHERE operation_id LIKE 'old-%'"))
}

// Through SQL, as an operator would with psql: once an import entered the
// range of an approved plan, its purge does not begin (IX316), and a new
// plan counts the imported identity.
func TestPurgeBeginRefusesAPlanThatAnImportOutdated(t *testing.T) {
	t.Parallel()
	f := setup(t)
	p := f.approvedPlan()
	require.Zero(t, p.Candidates)
	entry := f.importOld("imported-1", time.Now().Add(-400*24*time.Hour))

	_, err := f.pool.Exec(f.ctx, "SELECT idem.horizon_purge_begin($1, 'alice', '[]')", p.ID)
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "begin of an outdated plan: %v", err)
	assert.Equal(t, "IX316", pgErr.Code)
	assert.Contains(t, pgErr.Message, "entry plan "+strconv.FormatInt(entry, 10))
	var ids []int64
	require.NoError(t, f.pool.QueryRow(f.ctx, "SELECT idem.horizon_entered_after($1)", p.ID).Scan(&ids))
	assert.Equal(t, []int64{entry}, ids)

	_, err = horizon.Cancel(f.ctx, f.pool, p.ID, "alice", "outdated by an import")
	require.NoError(t, err)
	q := f.approvedPlan()
	assert.EqualValues(t, 1, q.Candidates, "a plan made after the import counts it")
	require.NoError(t, f.pool.QueryRow(f.ctx, "SELECT idem.horizon_entered_after($1)", q.ID).Scan(&ids))
	assert.Empty(t, ids)
	res, err := horizon.Purge(f.ctx, f.pool, q.ID, horizon.PurgeOptions{Operator: "alice"})
	require.NoError(t, err)
	assert.False(t, res.Aborted, res.AbortReason)
	assert.EqualValues(t, 1, res.Purged)
}
