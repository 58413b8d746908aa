package attack_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A staged import plan keeps its rows in a table of the schema owner's
// (idem.import_stage_<plan>): its planner's login may only INSERT into it,
// and only until the seal; nobody (the planner included) reads, changes,
// deletes or adds a row after it, or gives the table code to run. The seal
// checks every row and computes the digest itself: a forged hash, a gap in
// the numbering, a row with no evidence seal nothing. A service opens and
// runs nothing; a chunk runs only once its plan is approved and running,
// and enters once.
func TestImportStageIsWrittenOnlyByItsPlannerUntilTheSeal(t *testing.T) {
	t.Parallel()
	w := setup(t)
	payload, response := `{"amount":5}`, `{"ok":true}`
	old := time.Now().Add(-400 * 24 * time.Hour).Truncate(time.Microsecond) // as PostgreSQL keeps it
	newPlan := func() (int64, string) {
		var id int64
		require.NoError(t, w.operator.QueryRow(w.ctx, "SELECT (idem.import_plan_begin('store', NULL, 'alice', 'adopt')).id").Scan(&id))
		return id, fmt.Sprintf("idem.import_stage_%d", id)
	}
	insert := func(stage, op, payload, hash, evidence string) string {
		return fmt.Sprintf("INSERT INTO %s (tenant_id, operation_id, payload, payload_hash, response, created_at, evidence) VALUES ('t1', %s, %s, %s, %s, %s, %s)",
			stage, quote(op), quote(payload), quote(hash), quote(response), quote(old.UTC().Format(time.RFC3339Nano)), quote(evidence))
	}
	seal := "SELECT idem.import_plan_seal_stage($1, 'sha256:" + fmt.Sprintf("%064d", 0) + "', '{}', NULL, '" + projClass + "', 10)"
	open := "SELECT idem.import_plan_stage_open($1)"
	// inTx runs steps in one transaction of pool's, rolled back, and
	// returns the SQLSTATE of the first that fails ("" when none does).
	inTx := func(pool *pgxpool.Pool, id int64, steps ...string) string {
		t.Helper()
		tx, err := pool.Begin(w.ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(w.ctx) }()
		for _, s := range steps {
			var args []any
			if s == open || s == seal {
				args = []any{id}
			}
			if _, err := tx.Exec(w.ctx, s, args...); err != nil {
				return code(err)
			}
		}
		return ""
	}

	id, stage := newPlan()
	before := w.snapshot()
	assert.Equal(t, "42501", inTx(w.app, id, open), "a service stages nothing")
	assert.Equal(t, "IX343", inTx(w.second, id, open), "bob stages no plan of alice's")
	good := insert(stage, "s-1", payload, hashOf(payload), "row 1")
	for name, step := range map[string]string{
		"read":     "SELECT * FROM " + stage,
		"update":   "UPDATE " + stage + " SET response = '{\"ok\":false}'",
		"delete":   "DELETE FROM " + stage,
		"truncate": "TRUNCATE " + stage,
		"policy":   "ALTER TABLE " + stage + " ENABLE ROW LEVEL SECURITY",
		"rule":     "CREATE RULE r AS ON INSERT TO " + stage + " DO INSTEAD NOTHING",
		"trigger":  "CREATE TRIGGER t BEFORE INSERT ON " + stage + " FOR EACH ROW EXECUTE FUNCTION pg_catalog.suppress_redundant_updates_trigger()",
	} {
		assert.Equal(t, "42501", inTx(w.operator, id, open, good, step), "the planner may only insert: %s", name)
	}
	// The planner cannot pass its grant on (PostgreSQL grants nothing and warns).
	assert.Equal(t, "22012", inTx(w.operator, id, open, "GRANT INSERT ON "+stage+" TO idemctl_test_operator2",
		"SELECT 1/0 WHERE NOT has_table_privilege('idemctl_test_operator2', '"+stage+"', 'INSERT')"), "bob got no grant")
	for name, c := range map[string]struct{ row, code string }{
		"a hash that is not the payload's": {insert(stage, "s-2", `{"amount":6}`, hashOf(payload), "row 2"), "IX343"},
		"no evidence":                      {insert(stage, "s-2", payload, hashOf(payload), ""), "IX343"},
		"a payload that is not JSON":       {insert(stage, "s-2", `{"amount":`, hashOf(`{"amount":`), "row 2"), "22P02"},
		"an identity that breaks the rules": {strings.Replace(insert(stage, "s-2", payload, hashOf(payload), "row 2"), "'t1'", "'t\x01'", 1),
			"IX343"},
		"a gap in the numbering": {fmt.Sprintf("INSERT INTO %s (n, tenant_id, operation_id, payload, payload_hash, response, created_at, evidence) OVERRIDING SYSTEM VALUE VALUES (7, 't1', 's-2', %s, %s, %s, now() - interval '1 day', 'row 2')",
			stage, quote(payload), quote(hashOf(payload)), quote(response)), "IX343"},
	} {
		assert.Equal(t, c.code, inTx(w.operator, id, open, good, c.row, seal), "sealed with %s", name)
	}
	assert.Equal(t, "IX343", inTx(w.operator, id, open, seal), "nothing staged, nothing sealed")
	assert.Equal(t, before, w.snapshot(), "nothing written")

	// A stage left open across transactions: its grant is the planner's
	// login's alone, and the seal takes it back.
	_, err := w.operator.Exec(w.ctx, open, id)
	require.NoError(t, err)
	_, err = w.operator.Exec(w.ctx, good)
	require.NoError(t, err)
	_, err = w.operator.Exec(w.ctx, insert(stage, "s-2", payload, hashOf(payload), "row 2"))
	require.NoError(t, err)
	for name, pool := range map[string]*pgxpool.Pool{"bob": w.second, "app": w.app, "auditor": w.auditor} {
		_, err := pool.Exec(w.ctx, insert(stage, "s-3", payload, hashOf(payload), "row 3"))
		assert.Equal(t, "42501", code(err), "%s writes no stage of alice's", name)
	}
	_, err = w.second.Exec(w.ctx, seal, id)
	assert.Equal(t, "IX343", code(err), "bob seals no plan of alice's")
	_, err = w.operator.Exec(w.ctx, "SELECT idem.import_plan_seal($1, 'sha256:"+fmt.Sprintf("%064d", 0)+"', '{}', NULL)", id)
	assert.Equal(t, "IX343", code(err), "a staged plan is not sealed with the planner's own counts")
	var items int
	var digest []byte
	require.NoError(t, w.operator.QueryRow(w.ctx, "SELECT p.items, p.items_digest FROM idem.import_plan_seal_stage($1, 'sha256:"+
		fmt.Sprintf("%064d", 0)+"', '{}', NULL, '"+projClass+"', 10) p", id).Scan(&items, &digest))
	assert.Equal(t, 2, items)
	assert.Len(t, digest, 32, "the server's digest of the staged rows")
	sealed := w.snapshot()
	for name, step := range map[string]string{
		"insert":   insert(stage, "s-3", payload, hashOf(payload), "row 3"),
		"update":   "UPDATE " + stage + " SET response = '{\"ok\":false}'",
		"delete":   "DELETE FROM " + stage,
		"truncate": "TRUNCATE " + stage,
		"reopen":   fmt.Sprintf("SELECT idem.import_plan_stage_open(%d)", id),
		"run":      fmt.Sprintf("SELECT idem.import_run_begin(%d, 'alice')", id),
		"chunk":    fmt.Sprintf("SELECT idem.import_run_chunk(%d, 'alice', 0)", id),
	} {
		for who, pool := range map[string]*pgxpool.Pool{"alice": w.operator, "bob": w.second} {
			_, err := pool.Exec(w.ctx, step)
			assert.Contains(t, []string{"42501", "IX341"}, code(err), "%s after the seal: %s: %v", who, name, err)
		}
	}
	assert.Equal(t, sealed, w.snapshot(), "nothing written after the seal")

	require.NoError(t, w.approveImport(w.second, id, "bob", []any{"t1", "s-1", payload, hashOf(payload), response, old, nil, "row 1"},
		[]any{"t1", "s-2", payload, hashOf(payload), response, old, nil, "row 2"}))
	for _, step := range []string{"SELECT idem.import_run_begin($1, 'app')", "SELECT idem.import_run_chunk($1, 'app', 0)"} {
		_, err = w.app.Exec(w.ctx, step, id)
		assert.Equal(t, "42501", code(err), "a service runs no import: %s", step)
	}
	_, err = w.operator.Exec(w.ctx, "SELECT idem.import_run_chunk($1, 'alice', 0)", id)
	assert.Equal(t, "IX341", code(err), "no chunk before the run begins")
	_, err = w.operator.Exec(w.ctx, "SELECT idem.import_run_begin($1, 'alice')", id)
	require.NoError(t, err)
	_, err = w.operator.Exec(w.ctx, "SELECT idem.import_run_chunk($1, 'alice', 1)", id)
	assert.Equal(t, "IX343", code(err), "no chunk beyond the plan's rows")
	// Two runners at once: the chunk enters once.
	tx, err := w.operator.Begin(w.ctx)
	require.NoError(t, err)
	_, err = tx.Exec(w.ctx, "SELECT idem.import_run_chunk($1, 'alice', 0)", id)
	require.NoError(t, err)
	second := make(chan string, 1)
	go func() {
		var out string
		err := w.second.QueryRow(w.ctx, "SELECT idem.import_run_chunk($1, 'bob', 0)::text", id).Scan(&out)
		if err != nil {
			out = err.Error()
		}
		second <- out
	}()
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, tx.Commit(w.ctx))
	assert.JSONEq(t, `{"chunk": 0, "already": true}`, <-second)
	var entered int
	require.NoError(t, w.operator.QueryRow(w.ctx, "SELECT count(*) FROM idem.identity WHERE entry_plan = $1", id).Scan(&entered))
	assert.Equal(t, 2, entered)
	var state string
	require.NoError(t, w.operator.QueryRow(w.ctx, "SELECT (idem.import_run_finish($1, 'alice')).state", id).Scan(&state))
	assert.Equal(t, "done", state)
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
