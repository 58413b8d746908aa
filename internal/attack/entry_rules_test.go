package attack_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/dbtest"
)

// A JSON null is no response: an identity recorded or imported with one
// would answer every retry already_applied with nothing. Whoever calls the
// functions (an operator with psql), a record plan's item and an import's
// staged row without a real response are refused, and nothing is written.
func TestNoIdentityEntersWithANullResponse(t *testing.T) {
	t.Parallel()
	w := setup(t)
	payload := `{"amount":5}`
	digest := "sha256:" + strings.Repeat("0", 64)
	before := w.snapshot()
	for _, response := range []string{`"response":null,`, ``} {
		items := fmt.Sprintf(`[{"tenant_id":"t1","operation_id":"null-1","class":%q,"payload":%q,"payload_hash":%q,%s"evidence":"psp"}]`,
			projClass, payload, hashOf(payload), response)
		_, err := w.operator.Exec(w.ctx, "SELECT idem.entry_plan_create('record', 'file', $1, $2::jsonb, 'alice', 'because', NULL, NULL)",
			digest, items)
		assert.Equal(t, "IX343", code(err), "record with %q", response)
		assert.ErrorContains(t, err, "item 1 needs a response (JSON null is none)")
	}
	for _, response := range []string{"'null'", "NULL"} {
		tx, err := w.operator.Begin(w.ctx)
		require.NoError(t, err)
		var id int64
		require.NoError(t, tx.QueryRow(w.ctx, "SELECT (idem.import_plan_begin('store', NULL, 'alice', 'adopt')).id").Scan(&id))
		_, err = tx.Exec(w.ctx, "SELECT idem.import_plan_stage_open($1)", id)
		require.NoError(t, err)
		_, err = tx.Exec(w.ctx, fmt.Sprintf(`INSERT INTO idem.import_stage_%d (tenant_id, operation_id, payload, payload_hash, response, created_at, evidence)
			VALUES ('t1', 'null-resp', $1, $2, %s, now() - interval '1 day', 'row 1')`, id, response), payload, hashOf(payload))
		require.NoError(t, err)
		_, err = tx.Exec(w.ctx, "SELECT idem.import_plan_seal_stage($1, $2, '{}', NULL, $3, 10)", id, digest, projClass)
		assert.Equal(t, "IX343", code(err), "import with response %s", response)
		assert.ErrorContains(t, err, "no response (JSON null is none): nothing sealed")
		require.NoError(t, tx.Rollback(w.ctx))
	}
	assert.Equal(t, before, w.snapshot(), "nothing written")
}

// An import lets identities in without their effect as a record does, so
// it cites what a record cites, checked where the plan's state changes, for
// every caller: a money class needs the business contract, a class with a
// SQL effect who wrote its effects. The seal refuses a plan that does not
// cite them; a class that became money after the plan was sealed stops
// its approval, and after the approval its run. A service cannot ask.
func TestAnImportCitesWhatARecordCites(t *testing.T) {
	t.Parallel()
	w := setup(t)
	payload := `{"amount":500,"currency":"EUR"}`
	digest := "sha256:" + strings.Repeat("0", 64)
	const money = `UPDATE idem.op_class SET money = '{"amount": "/amount", "currency": "/currency", "unit": "minor"}' WHERE name = $1`
	// plan stages one row in a new plan of alice's citing contract, and
	// seals it; it returns the plan and the seal's error.
	at := map[int64]time.Time{}
	plan := func(contract string) (int64, error) {
		tx, err := w.operator.Begin(w.ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(w.ctx) }()
		var id int64
		require.NoError(t, tx.QueryRow(w.ctx, "SELECT (idem.import_plan_begin('store', NULL, 'alice', 'adopt', nullif($1, ''))).id", contract).Scan(&id))
		_, err = tx.Exec(w.ctx, "SELECT idem.import_plan_stage_open($1)", id)
		require.NoError(t, err)
		at[id] = time.Now().Add(-time.Hour).Truncate(time.Microsecond)
		_, err = tx.Exec(w.ctx, fmt.Sprintf(`INSERT INTO idem.import_stage_%d (tenant_id, operation_id, payload, payload_hash, response, created_at, evidence)
			VALUES ('t1', 'cite-' || $3, $1, $2, '{"ok":true}', $4, 'row 1')`, id), payload, hashOf(payload), fmt.Sprint(id), at[id])
		require.NoError(t, err)
		if _, err := tx.Exec(w.ctx, "SELECT idem.import_plan_seal_stage($1, $2, '{}', NULL, $3, 10)", id, digest, projClass); err != nil {
			return id, err
		}
		return id, tx.Commit(w.ctx)
	}
	// approve is bob's approval, having read the plan's one row again.
	approve := func(id int64) error {
		tx, err := w.second.Begin(w.ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(w.ctx) }()
		if _, err := tx.Exec(w.ctx, "SELECT idem.import_check_open($1)", id); err != nil {
			return err
		}
		_, err = tx.Exec(w.ctx, `INSERT INTO pg_temp.idem_import_check (tenant_id, operation_id, payload_hash, response, created_at, evidence)
			VALUES ('t1', 'cite-' || $2, $1, '{"ok":true}', $3, 'row 1')`, hashOf(payload), fmt.Sprint(id), at[id])
		require.NoError(t, err)
		if _, err := tx.Exec(w.ctx, "SELECT idem.import_plan_approve($1, 'bob')", id); err != nil {
			return err
		}
		return tx.Commit(w.ctx)
	}
	var problem *string
	_, err := w.app.Exec(w.ctx, "SELECT idem.entry_citation_problem('import', $1, NULL, NULL)", projClass)
	assert.Equal(t, "42501", code(err), "a service asks nothing")
	require.NoError(t, w.operator.QueryRow(w.ctx, "SELECT idem.entry_citation_problem('import', $1, NULL, NULL)", projClass).Scan(&problem))
	assert.Nil(t, problem, "a class of no money and no SQL effect cites nothing")

	// Two plans sealed before the class moves money: one approved, one not.
	approved, err := plan("")
	require.NoError(t, err)
	require.NoError(t, approve(approved))
	planned, err := plan("")
	require.NoError(t, err)
	require.NoError(t, dbtest.Owner(w.dsn, money, projClass))

	before := w.snapshot()
	_, err = plan("")
	assert.Equal(t, "IX343", code(err), "a money class without its contract is not sealed")
	assert.ErrorContains(t, err, "moves money: cite the business contract the approver checks the imported amounts against (--contract)")
	err = approve(planned)
	assert.Equal(t, "IX343", code(err), "nor approved")
	_, err = w.operator.Exec(w.ctx, "SELECT idem.import_run_begin($1, 'alice')", approved)
	assert.Equal(t, "IX343", code(err), "nor run")
	_, err = w.operator.Exec(w.ctx, "SELECT idem.entry_plan_run($1, 'alice')", approved)
	assert.Equal(t, "IX341", code(err), "the record door runs no staged import at all")
	assert.Equal(t, before, w.snapshot(), "nothing written")

	// With the contract it is sealed, with the money it stages added up.
	id, err := plan("PSP-7")
	require.NoError(t, err)
	var counts string
	require.NoError(t, w.operator.QueryRow(w.ctx, "SELECT counts -> 'money' FROM idem.entry_plan WHERE id = $1", id).Scan(&counts))
	assert.JSONEq(t, `{"unit": "minor", "unread": 0, "currencies": [{"currency": "EUR", "amount": "500", "records": 1, "negative": "0", "negative_records": 0}], "first_unread": null}`, counts)
}
