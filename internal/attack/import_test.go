package attack_test

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/importer"
)

// Importing a store lets identities in without their effect, backdated:
// it runs only as the schema owner's functions, behind two persons. No
// service and no single operator writes an imported identity, fills
// another person's plan, changes a sealed plan, approves a plan still
// being filled, or reaches the internal run; the tables stay closed. The
// run enters only what it staged in the schema owner's stage, and only the
// exact planned items: a forged, extra, doubled or missing row enters
// nothing, and the operator cannot give the stage code to run as owner.
func TestImportRunsOnlyAsTheOwnersFunctions(t *testing.T) {
	t.Parallel()
	w := setup(t)
	payload := `{"amount":5}`
	response := `{"ok":true}`
	add := func(pool *pgxpool.Pool, id int64, op string, at time.Time, hash string) error {
		fp := importer.Fingerprint("t1", op, hash, "", []byte(response), at)
		_, err := pool.Exec(w.ctx, "SELECT idem.import_plan_add($1, $2, $3, $4, $5, $6, $7, $8)", id, projClass,
			[]string{"t1"}, []string{op}, []string{"row 1"}, []time.Time{at}, []*string{nil}, [][]byte{fp[:]})
		return err
	}
	old := time.Now().Add(-400 * 24 * time.Hour)
	digest := "sha256:" + strings.Repeat("ab", 32)
	begin := "SELECT (idem.import_plan_begin('store', NULL, 'alice', 'adopt')).id"

	before := w.snapshot()
	_, err := w.app.Exec(w.ctx, begin)
	assert.Equal(t, "42501", code(err), "a service plans no import")
	for name, pool := range map[string]*pgxpool.Pool{"app": w.app, "operator": w.operator} {
		for _, sql := range []string{
			"INSERT INTO idem.imported_hash VALUES ('t1', 'x', decode(repeat('00', 32), 'hex'), 'sha256-raw', 1)",
			"INSERT INTO idem.entry_item (plan_id, seq, tenant_id, operation_id, op_class, response, evidence, store_hash) VALUES (1, 1, 't1', 'x', 'proj.view', '{}', 'e', decode(repeat('00', 32), 'hex'))",
			"INSERT INTO idem.inbox_body (tenant_id, operation_id, created_at, op_class, payload, response) VALUES ('t1', 'x', now() - interval '400 days', 'proj.view', '{}', '{}')",
			"UPDATE idem.entry_plan SET state = 'planned'",
			"SELECT idem.import_run(p.id, 'alice') FROM idem.entry_plan p",
			"SELECT idem.import_item_problem('t1', 'x', NULL, NULL, '{}', now(), NULL)",
			"SELECT idem.import_plan_item_problem('t1', 'x', now(), NULL, NULL)",
			"SELECT idem.import_fingerprint('t1', 'x', NULL, NULL, NULL, now())",
		} {
			_, err := pool.Exec(w.ctx, sql)
			assert.Equal(t, "42501", code(err), "%s: %s", name, sql)
		}
	}
	assert.Equal(t, before, w.snapshot(), "nothing written")

	var id int64
	require.NoError(t, w.operator.QueryRow(w.ctx, begin).Scan(&id))
	err = add(w.operator, id, "future", time.Now().Add(time.Hour), hashOf(payload))
	assert.Equal(t, "IX343", code(err), "a future created_at")
	err = add(w.second, id, "bobs", old, hashOf(payload))
	assert.Equal(t, "IX343", code(err), "bob fills no plan of alice's")
	require.NoError(t, add(w.operator, id, "old-1", old, hashOf(payload)))
	_, err = w.second.Exec(w.ctx, "SELECT idem.import_plan_approve($1, 'bob')", id)
	assert.Equal(t, "IX341", code(err), "a plan still being filled is not approved")
	_, err = w.operator.Exec(w.ctx, "SELECT idem.import_plan_seal($1, $2, '{}', NULL)", id, digest)
	require.NoError(t, err)
	err = add(w.operator, id, "late", old, hashOf(payload))
	assert.Equal(t, "IX341", code(err), "a sealed plan takes no more items")
	_, err = w.operator.Exec(w.ctx, "SELECT idem.entry_plan_run($1, 'alice')", id)
	assert.Equal(t, "IX341", code(err), "not approved: nothing enters")
	_, err = w.operator.Exec(w.ctx, "SELECT idem.import_plan_approve($1, 'bob')", id)
	assert.Equal(t, "IX342", code(err), "alice approves nothing of hers")
	var n int
	require.NoError(t, w.operator.QueryRow(w.ctx, "SELECT count(*) FROM idem.identity WHERE entry_plan IS NOT NULL").Scan(&n))
	assert.Zero(t, n)

	require.NoError(t, w.approveImport(w.second, id, "bob", []any{"t1", "old-1", payload, hashOf(payload), response, old, nil, "row 1"}))

	// The run enters only rows staged in the schema owner's stage, and only
	// if they are exactly the planned items.
	stage := "INSERT INTO pg_temp.idem_import_stage VALUES ('t1', $1, $2, $3, $4, $5, NULL)"
	run := func(name string, steps ...func(tx pgx.Tx) error) error {
		t.Helper()
		tx, err := w.operator.Begin(w.ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(w.ctx) }()
		for _, step := range steps {
			if err := step(tx); err != nil {
				return err
			}
		}
		_, err = tx.Exec(w.ctx, "SELECT idem.entry_plan_run($1, 'alice')", id)
		if err == nil {
			err = tx.Commit(w.ctx)
		}
		return err
	}
	exec := func(sql string, args ...any) func(tx pgx.Tx) error {
		return func(tx pgx.Tx) error { _, err := tx.Exec(w.ctx, sql, args...); return err }
	}
	open := exec("SELECT idem.import_stage_open($1)", id)
	before = w.snapshot()
	assert.Equal(t, "IX341", code(run("nothing staged")), "nothing staged: nothing enters")
	assert.Equal(t, "IX341", code(run("own stage",
		exec("CREATE TEMP TABLE idem_import_stage (tenant_id text, operation_id text, payload text, payload_hash text, response text, created_at timestamptz, store_hash text)"),
		exec(stage, "old-1", payload, hashOf(payload), response, old))), "a stage of the operator's own is not read")
	assert.Equal(t, "42P07", code(run("stage taken", exec("CREATE TEMP TABLE idem_import_stage (x int)"), open)),
		"a name taken by the operator is not opened")
	assert.Equal(t, "42501", code(run("policy", open, exec("ALTER TABLE pg_temp.idem_import_stage ENABLE ROW LEVEL SECURITY"))),
		"the operator cannot give the stage code to run")
	assert.Equal(t, "42501", code(run("rule", open, exec("CREATE RULE r AS ON INSERT TO pg_temp.idem_import_stage DO INSTEAD NOTHING"))),
		"the operator cannot give the stage rules")
	assert.Equal(t, "IX343", code(run("forged hash", open, exec(stage, "old-1", `{"amount":6}`, hashOf(payload), response, old))),
		"a hash that is not the payload's")
	assert.Equal(t, "IX343", code(run("forged payload", open, exec(stage, "old-1", `{"amount":6}`, hashOf(`{"amount":6}`), response, old))),
		"a payload that is not the planned one")
	assert.Equal(t, "IX343", code(run("forged response", open, exec(stage, "old-1", payload, hashOf(payload), `{"ok":false}`, old))),
		"a response that is not the planned one")
	assert.Equal(t, "IX343", code(run("extra row", open, exec(stage, "old-1", payload, hashOf(payload), response, old),
		exec(stage, "old-2", payload, hashOf(payload), response, old))), "a row not in the plan")
	assert.Equal(t, "23505", code(run("twice", open, exec(stage, "old-1", payload, hashOf(payload), response, old),
		exec(stage, "old-1", payload, hashOf(payload), response, old))), "a row staged twice")
	assert.Equal(t, "IX343", code(run("missing", open)), "a planned item missing")
	assert.Equal(t, before, w.snapshot(), "nothing written")
	require.NoError(t, run("exact", open, exec(stage, "old-1", payload, hashOf(payload), response, old)))
	var at time.Time
	require.NoError(t, w.operator.QueryRow(w.ctx, "SELECT created_at FROM idem.identity WHERE entry_plan = $1", id).Scan(&at))
	assert.WithinDuration(t, old, at, time.Millisecond, "entered with its original age")
}

// A plan that keeps one digest of its items (no item row) is sealed by its
// planner only, and its run enters the staged rows only if they are the
// planned ones in the planned order with the planned counts and sample: a
// forged payload, response or evidence, a row extra, missing, doubled or
// out of order, or counts the items do not have, enter nothing.
func TestImportDigestPlanRunsOnlyWhatWasPlanned(t *testing.T) {
	t.Parallel()
	w := setup(t)
	payload, response := `{"amount":5}`, `{"ok":true}`
	old := time.Now().Add(-400 * 24 * time.Hour).Truncate(time.Microsecond)
	ops := []string{"d-1", "d-2"}
	run := sha256.New()
	for _, op := range ops {
		fp := importer.Fingerprint("t1", op, hashOf(payload), "", []byte(response), old)
		run.Write(fp[:])
		run.Write([]byte{0, 0, 0, 5})
		run.Write([]byte("row " + op[2:]))
	}
	items := sha256.Sum256(run.Sum(nil))
	at := old.UTC().Format(time.RFC3339Nano)
	counts := func(tenants int) string {
		return fmt.Sprintf(`{"items": 2, "tenants": %d, "hash_only": 0, "oldest": %q, "newest": %q, "class": %q}`, tenants, at, at, projClass)
	}
	sample := fmt.Sprintf(`[{"tenant_id": "t1", "operation_id": "d-1", "created_at": %q, "evidence": "row 1"}]`, at)
	seal := "SELECT idem.import_plan_seal_digest($1, $2, '{}', NULL, $3, $4, $5)"
	digest := "sha256:" + strings.Repeat("ab", 32)
	plan := func(tenants int) int64 {
		var id int64
		require.NoError(t, w.operator.QueryRow(w.ctx, "SELECT (idem.import_plan_begin('store', NULL, 'alice', 'adopt')).id").Scan(&id))
		_, err := w.second.Exec(w.ctx, seal, id, digest, items[:], counts(tenants), sample)
		assert.Equal(t, "IX343", code(err), "bob seals no plan of alice's")
		_, err = w.operator.Exec(w.ctx, seal, id, digest, items[:], counts(tenants), `[{"tenant_id": "t1"}]`)
		assert.Equal(t, "IX343", code(err), "a sample without its items' fields")
		_, err = w.operator.Exec(w.ctx, seal, id, digest, items[:], counts(tenants), sample)
		require.NoError(t, err)
		_, err = w.operator.Exec(w.ctx, "SELECT idem.import_plan_approve($1, 'bob')", id)
		assert.Equal(t, "IX342", code(err), "alice approves nothing of hers")
		err = w.approveImport(w.second, id, "bob", []any{"t1", "d-1", payload, hashOf(payload), response, old, nil, "row 1"},
			[]any{"t1", "d-2", payload, hashOf(payload), response, old, nil, "row 2"})
		assert.Equal(t, "IX343", code(err), "a plan that keeps only its planner's digest cannot be checked: not approved")
		w.approveAsBefore(id)
		return id
	}
	stage := func(op, payload, response, evidence string) func(tx pgx.Tx) error {
		return func(tx pgx.Tx) error {
			_, err := tx.Exec(w.ctx, "INSERT INTO pg_temp.idem_import_stage VALUES ('t1', $1, $2, $3, $4, $5, NULL, $6)",
				op, payload, hashOf(payload), response, old, evidence)
			return err
		}
	}
	runPlan := func(id int64, steps ...func(tx pgx.Tx) error) error {
		t.Helper()
		tx, err := w.operator.Begin(w.ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(w.ctx) }()
		if _, err := tx.Exec(w.ctx, "SELECT idem.import_stage_open($1)", id); err != nil {
			return err
		}
		for _, step := range steps {
			if err := step(tx); err != nil {
				return err
			}
		}
		_, err = tx.Exec(w.ctx, "SELECT idem.entry_plan_run($1, 'alice')", id)
		if err == nil {
			err = tx.Commit(w.ctx)
		}
		return err
	}
	one, two := stage("d-1", payload, response, "row 1"), stage("d-2", payload, response, "row 2")

	lying := plan(2)
	id := plan(1)
	before := w.snapshot()
	assert.Equal(t, "IX343", code(runPlan(lying, one, two)), "counts the items do not have (two tenants)")
	for name, steps := range map[string][]func(pgx.Tx) error{
		"forged payload":  {stage("d-1", `{"amount":6}`, response, "row 1"), two},
		"forged response": {stage("d-1", payload, `{"ok":false}`, "row 1"), two},
		"forged evidence": {stage("d-1", payload, response, "row 9"), two},
		"no evidence":     {stage("d-1", payload, response, ""), two},
		"out of order":    {two, one},
		"missing":         {one},
		"extra":           {one, two, stage("d-3", payload, response, "row 3")},
	} {
		assert.Equal(t, "IX343", code(runPlan(id, steps...)), name)
	}
	assert.Equal(t, "IX343", code(runPlan(id, one, one, two)), "a row staged twice")
	assert.Equal(t, "IX343", code(runPlan(id, one, one)), "a row staged twice, another missing")
	assert.Equal(t, before, w.snapshot(), "nothing written")
	require.NoError(t, runPlan(id, one, two))
	var n int
	require.NoError(t, w.operator.QueryRow(w.ctx, "SELECT count(*) FROM idem.identity WHERE entry_plan = $1 AND created_at = $2", id, old).Scan(&n))
	assert.Equal(t, 2, n, "both entered with their original age")
}
