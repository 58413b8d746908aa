package importer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/governance"
	"github.com/idemctl/idemctl/importer"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// storeFile writes n finished keys of tenant "7" as the import's NDJSON,
// ten days old, a minute apart.
func storeFile(t *testing.T, n int) string {
	var b strings.Builder
	at := time.Now().Add(-10 * 24 * time.Hour).UTC()
	for i := range n {
		fmt.Fprintf(&b, `{"tenant_id":"7","operation_id":"k-%03d","payload":{"amount":%d},"response":{"ok":%d},"created_at":%q,"status":"finished"}`+"\n",
			i, i, i, at.Add(time.Duration(i)*time.Minute).Format(time.RFC3339Nano))
	}
	path := filepath.Join(t.TempDir(), "store.ndjson")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
	return path
}

// planFile plans and approves the import of a file, chunks of chunk rows.
func planFile(t *testing.T, f *fixture, path string, chunk int) governance.EntryPlan {
	r, err := importer.Plan(f.ctx, f.alice, importer.File(path), importer.PlanOptions{Class: rideCharge, Correction: ridesLedger, Operator: "alice", Reason: "adopt",
		ChunkRows: chunk}, importer.Sinks{})
	require.NoError(t, err)
	_, err = importer.Approve(f.ctx, f.bob, r.Plan.ID, "bob", importer.File(path))
	require.NoError(t, err)
	return r.Plan
}

func countIn(t *testing.T, f *fixture, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, f.alice.QueryRow(f.ctx, sql, args...).Scan(&n))
	return n
}

// A staged plan keeps its rows in the database, with the server's digest,
// and its run enters them by chunks, each its own transaction: a run killed
// after some chunks resumes where it stopped, without reading the source
// again and without entering a chunk twice; the audit says the run was not
// one transaction.
func TestImportStagedRunResumesWhereItStopped(t *testing.T) {
	t.Parallel()
	f := setup(t)
	rocketSetup(t, f)
	path := storeFile(t, 35)
	plan := planFile(t, f, path, 10)
	assert.True(t, plan.Staged)
	require.NotNil(t, plan.ItemsDigest, "the server's digest of the staged rows")
	assert.Regexp(t, `^[0-9a-f]{64}$`, *plan.ItemsDigest, "plain hex, as every digest shown")
	assert.Equal(t, 35, plan.Items)
	assert.JSONEq(t, "10", string(mustField(t, plan.Counts, "chunk_rows")))

	// A run killed after chunks 0 and 2 committed.
	_, err := f.alice.Exec(f.ctx, "SELECT idem.import_run_begin($1, 'alice')", plan.ID)
	require.NoError(t, err)
	for _, k := range []int{0, 2} {
		_, err := f.alice.Exec(f.ctx, "SELECT idem.import_run_chunk($1, 'alice', $2)", plan.ID, k)
		require.NoError(t, err)
	}
	outcomes, err := importer.Outcomes(f.ctx, f.alice, plan.ID)
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"entered": 20, "pending": 15}, outcomes)
	var again string
	require.NoError(t, f.alice.QueryRow(f.ctx, "SELECT idem.import_run_chunk($1, 'alice', 2)::text", plan.ID).Scan(&again))
	assert.JSONEq(t, `{"chunk": 2, "already": true}`, again, "a chunk enters once")
	assert.Equal(t, 20, countIn(t, f, "SELECT count(*) FROM idem.identity WHERE entry_plan = $1", plan.ID))
	_, err = f.alice.Exec(f.ctx, "SELECT idem.import_run_finish($1, 'alice')", plan.ID)
	assert.ErrorContains(t, err, "2 of its 4 chunks committed")

	// The source changed meanwhile: a resumed run does not read it.
	require.NoError(t, os.WriteFile(path, []byte("changed\n"), 0o600))
	done, err := importer.Run(f.ctx, f.alice, plan.ID, "alice", func(context.Context, *importer.Cursor, bool) (importer.Source, error) {
		return nil, errors.New("a resumed run reads no source")
	})
	require.NoError(t, err)
	assert.Equal(t, "done", done.State)
	assert.Equal(t, 35, done.Entered)
	outcomes, err = importer.Outcomes(f.ctx, f.alice, plan.ID)
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"entered": 35}, outcomes)
	assert.Equal(t, 35, countIn(t, f, "SELECT count(*) FROM idem.identity WHERE entry_plan = $1", plan.ID))
	assert.Equal(t, 35, countIn(t, f, "SELECT count(*) FROM idem.inbox_body WHERE tenant_id = '7'"), "a body each, none twice")
	assert.Equal(t, 0, countIn(t, f, "SELECT count(*) FROM pg_class WHERE relname = $1", fmt.Sprintf("import_stage_%d", plan.ID)),
		"the stage is dropped once the run is done")
	var audit string
	require.NoError(t, f.alice.QueryRow(f.ctx, `SELECT details FROM idem.audit WHERE action = 'entry.run' AND target = $1`,
		fmt.Sprintf("entry_plan:%d", plan.ID)).Scan(&audit))
	assert.Contains(t, audit, `"chunks": 4`)
	assert.Contains(t, audit, `"all_or_nothing": false`)
}

// An unlogged stage is emptied when the database restarts after a crash:
// the run refuses the rest (nothing half-entered in a chunk), what entered
// stays, and a new plan of the same source skips it.
func TestImportStageEmptiedByACrashIsPlannedAgain(t *testing.T) {
	t.Parallel()
	f := setup(t)
	rocketSetup(t, f)
	path := storeFile(t, 25)
	plan := planFile(t, f, path, 10)
	_, err := f.alice.Exec(f.ctx, "SELECT idem.import_run_begin($1, 'alice')", plan.ID)
	require.NoError(t, err)
	_, err = f.alice.Exec(f.ctx, "SELECT idem.import_run_chunk($1, 'alice', 0)", plan.ID)
	require.NoError(t, err)
	// What crash recovery does to an unlogged table.
	dbtest.Admin(t, f.dsn, fmt.Sprintf("TRUNCATE idem.import_stage_%d", plan.ID))
	open := func(context.Context, *importer.Cursor, bool) (importer.Source, error) {
		return importer.OpenNDJSON(path)
	}
	_, err = importer.Run(f.ctx, f.alice, plan.ID, "alice", open)
	assert.ErrorIs(t, err, governance.ErrRefused)
	assert.ErrorContains(t, err, "plan the import again")
	assert.Equal(t, 10, countIn(t, f, "SELECT count(*) FROM idem.identity WHERE tenant_id = '7'"))
	// It can never finish, so it can be ended; what entered stays.
	aborted, err := governance.AbortEntry(f.ctx, f.bob, plan.ID, "bob", "stage lost in the crash of 2 Dec")
	require.NoError(t, err)
	assert.Equal(t, "aborted", aborted.State)
	assert.Equal(t, 1, countIn(t, f, fmt.Sprintf(`SELECT count(*) FROM idem.audit WHERE action = 'entry.abort'
		AND target = 'entry_plan:%d' AND (details::jsonb ->> 'chunks_entered')::int = 1
		AND (details::jsonb ->> 'stage_rows')::int = 0`, plan.ID)))
	assert.Equal(t, 10, countIn(t, f, "SELECT count(*) FROM idem.identity WHERE tenant_id = '7'"))
	_, err = importer.Run(f.ctx, f.alice, plan.ID, "alice", open)
	assert.ErrorContains(t, err, "aborted")

	again := planFile(t, f, path, 10)
	_, err = importer.Run(f.ctx, f.alice, again.ID, "alice", open)
	require.NoError(t, err)
	outcomes, err := importer.Outcomes(f.ctx, f.alice, again.ID)
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"entered": 15, "skipped": 10}, outcomes)
	assert.Equal(t, 25, countIn(t, f, "SELECT count(*) FROM idem.identity WHERE tenant_id = '7'"))
}

func mustField(t *testing.T, raw []byte, key string) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &m))
	v, ok := m[key]
	require.True(t, ok, "no %s in %s", key, raw)
	return v
}

// The run reads a postgres source again only up to the plan's cursor: rows
// the old code wrote since, or a row with a future created_at (invalid at
// the plan, after the cursor), do not stop it and do not enter.
func TestImportRunReadsTheSourceUpToTheCursor(t *testing.T) {
	t.Parallel()
	f := setup(t)
	rocketSetup(t, f)
	fillRocket(t, f.dsn, "key-", 30, 10*24*time.Hour, time.Hour)
	dbtest.Admin(t, f.dsn, `INSERT INTO rocket.idempotency_keys (created_at, idempotency_key, request_method, request_params, request_path,
		response_code, response_body, recovery_point, user_id, locked_at)
		VALUES (now() + interval '1 day', 'future', 'POST', '{"amount":1}', '/charges', 201, '{}', 'finished', 1, NULL)`)
	src := importer.PostgresSource{DSN: dbtest.SourceDSN(f.dsn), Query: rocketQuery, PasswordEnv: dbtest.SourcePasswordEnv}
	r, err := importer.Plan(f.ctx, f.alice, src.Opener(), importer.PlanOptions{Class: rideCharge, Correction: ridesLedger, Operator: "alice", Reason: "adopt", ChunkRows: 7},
		importer.Sinks{})
	require.NoError(t, err)
	assert.Equal(t, 1, r.Counts.Invalid, "the future row")
	assert.Equal(t, 24, r.Plan.Items)
	_, err = importer.Approve(f.ctx, f.bob, r.Plan.ID, "bob", src.Opener())
	require.NoError(t, err)
	fillRocket(t, f.dsn, "late-", 10, time.Minute, 0)
	_, err = importer.Run(f.ctx, f.alice, r.Plan.ID, "alice", func(ctx context.Context, since *importer.Cursor, ordered bool) (importer.Source, error) {
		s := src
		s.Since, s.Unordered = since, !ordered
		return s.Open(ctx)
	})
	require.NoError(t, err)
	assert.Equal(t, 24, countIn(t, f, "SELECT count(*) FROM idem.identity WHERE entry_plan = $1", r.Plan.ID))
	assert.Equal(t, 0, countIn(t, f, "SELECT count(*) FROM idem.identity WHERE operation_id LIKE 'late-%' OR operation_id = 'future'"))
}

// The run does not read the source again: it enters the stage its approval
// compared with the source. A plan approved without that comparison (before
// approvals read the source: here by hand) does not run.
func TestImportRunRefusesAPlanApprovedWithoutItsSource(t *testing.T) {
	t.Parallel()
	f := setup(t)
	rocketSetup(t, f)
	path := storeFile(t, 5)
	r, err := importer.Plan(f.ctx, f.alice, importer.File(path), importer.PlanOptions{Class: rideCharge, Correction: ridesLedger,
		Operator: "alice", Reason: "adopt"}, importer.Sinks{})
	require.NoError(t, err)
	dbtest.Admin(t, f.dsn, "UPDATE idem.entry_plan SET state = 'approved', approved_person = 'bob', approved_by = 'bob', approved_at = now() WHERE id = $1",
		r.Plan.ID)
	_, err = importer.Run(f.ctx, f.alice, r.Plan.ID, "alice", nil)
	assert.ErrorIs(t, err, governance.ErrState)
	assert.ErrorContains(t, err, "was approved without its source read again")
	assert.Zero(t, countIn(t, f, "SELECT count(*) FROM idem.identity WHERE entry_plan = $1", r.Plan.ID), "nothing entered")
	assert.Equal(t, "approved", stateOf(t, f, r.Plan.ID), "the run did not start")
}

func stateOf(t *testing.T, f *fixture, id int64) string {
	t.Helper()
	var s string
	require.NoError(t, f.alice.QueryRow(f.ctx, "SELECT state FROM idem.entry_plan WHERE id = $1", id).Scan(&s))
	return s
}

// A staged plan sealed before "a JSON null response is no response" that
// holds one still runs, but that row is refused (not entered), as its plan
// would now send it to the ambiguous list.
func TestImportRunRefusesAStagedRowWithANullResponse(t *testing.T) {
	t.Parallel()
	f := setup(t)
	rocketSetup(t, f)
	path := storeFile(t, 12)
	plan := planFile(t, f, path, 5)
	// What an older seal let in.
	dbtest.Admin(t, f.dsn, fmt.Sprintf("UPDATE idem.import_stage_%d SET response = 'null' WHERE operation_id IN ('k-003', 'k-007')", plan.ID))
	done, err := importer.Run(f.ctx, f.alice, plan.ID, "alice", func(context.Context, *importer.Cursor, bool) (importer.Source, error) {
		return importer.OpenNDJSON(path)
	})
	require.NoError(t, err)
	assert.Equal(t, "done", done.State)
	assert.Equal(t, 10, done.Entered)
	outcomes, err := importer.Outcomes(f.ctx, f.alice, plan.ID)
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"entered": 10, "refused": 2}, outcomes)
	assert.Equal(t, 0, countIn(t, f, "SELECT count(*) FROM idem.identity WHERE operation_id IN ('k-003', 'k-007')"))
	assert.Equal(t, 10, countIn(t, f, "SELECT count(*) FROM idem.inbox_body WHERE tenant_id = '7'"))
}

// The items digest is the one it always was (sha256 over the sha256 of each
// run of 4096 rows, each run's rows aggregated in the order n): a plan
// sealed before idem.import_stage_digest fed its runs through an ordered
// subquery is approved after an upgrade, and the approval's digest is the
// seal's.
func TestImportStageDigestIsTheOrderedAggregateOfItsRuns(t *testing.T) {
	t.Parallel()
	f := setup(t)
	rocketSetup(t, f)
	path := storeFile(t, 9000)
	r, err := importer.Plan(f.ctx, f.alice, importer.File(path), importer.PlanOptions{Class: rideCharge, Correction: ridesLedger,
		Operator: "alice", Reason: "adopt"}, importer.Sinks{})
	require.NoError(t, err)
	conn, err := pgx.Connect(f.ctx, f.dsn)
	require.NoError(t, err)
	defer conn.Close(f.ctx)
	_, err = conn.Exec(f.ctx, "SET TimeZone = 'UTC'; SET DateStyle = 'ISO, YMD'; SET IntervalStyle = 'postgres'; SET extra_float_digits = 1")
	require.NoError(t, err)
	var same bool
	require.NoError(t, conn.QueryRow(f.ctx, fmt.Sprintf(`
		SELECT p.items_digest = (
		    SELECT sha256(string_agg(r.digest, ''::bytea ORDER BY k))
		    FROM generate_series(0, (9000 - 1) / 4096) k,
		    LATERAL (SELECT sha256(string_agg(textsend(row(s.tenant_id, s.operation_id, s.payload_hash, s.store_hash,
		                                                   s.response::jsonb, s.created_at, s.evidence)::text), ''::bytea
		                                      ORDER BY s.n)) AS digest
		             FROM idem.import_stage_%d s WHERE s.n BETWEEN k * 4096 + 1 AND (k + 1) * 4096) r)
		FROM idem.entry_plan p WHERE p.id = $1`, r.Plan.ID), r.Plan.ID).Scan(&same))
	require.True(t, same, "the seal's items digest is the ordered aggregate of its runs")
	_, err = importer.Approve(f.ctx, f.bob, r.Plan.ID, "bob", importer.File(path))
	require.NoError(t, err)
}
