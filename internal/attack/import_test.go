package attack_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Importing a store lets identities in without their effect, backdated:
// it runs only as the schema owner's functions, behind two persons. No
// service and no single operator writes an imported identity, fills
// another person's plan, changes a sealed plan, approves a plan still
// being filled, or reaches the internal run; the tables stay closed.
func TestImportRunsOnlyAsTheOwnersFunctions(t *testing.T) {
	t.Parallel()
	w := setup(t)
	payload := `{"amount":5}`
	add := func(pool *pgxpool.Pool, id int64, op string, at time.Time, hash string) error {
		_, err := pool.Exec(w.ctx, "SELECT idem.import_plan_add($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)", id, projClass,
			[]string{"t1"}, []string{op}, []string{payload}, []string{hash}, []string{`{"ok":true}`}, []string{"row 1"},
			[]time.Time{at}, []*string{nil})
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
	err = add(w.operator, id, "forged", old, hashOf(`{"amount":6}`))
	assert.Equal(t, "IX343", code(err), "a hash that is not the payload's")
	err = add(w.second, id, "bobs", old, hashOf(payload))
	assert.Equal(t, "IX343", code(err), "bob fills no plan of alice's")
	require.NoError(t, add(w.operator, id, "old-1", old, hashOf(payload)))
	_, err = w.second.Exec(w.ctx, "SELECT idem.entry_plan_approve($1, 'bob')", id)
	assert.Equal(t, "IX341", code(err), "a plan still being filled is not approved")
	_, err = w.operator.Exec(w.ctx, "SELECT idem.import_plan_seal($1, $2, '{}', NULL)", id, digest)
	require.NoError(t, err)
	err = add(w.operator, id, "late", old, hashOf(payload))
	assert.Equal(t, "IX341", code(err), "a sealed plan takes no more items")
	_, err = w.operator.Exec(w.ctx, "SELECT idem.entry_plan_run($1, 'alice')", id)
	assert.Equal(t, "IX341", code(err), "not approved: nothing enters")
	_, err = w.operator.Exec(w.ctx, "SELECT idem.entry_plan_approve($1, 'bob')", id)
	assert.Equal(t, "IX342", code(err), "alice approves nothing of hers")
	var n int
	require.NoError(t, w.operator.QueryRow(w.ctx, "SELECT count(*) FROM idem.identity WHERE entry_plan IS NOT NULL").Scan(&n))
	assert.Zero(t, n)

	_, err = w.second.Exec(w.ctx, "SELECT idem.entry_plan_approve($1, 'bob')", id)
	require.NoError(t, err)
	_, err = w.operator.Exec(w.ctx, "SELECT idem.entry_plan_run($1, 'alice')", id)
	require.NoError(t, err)
	var at time.Time
	require.NoError(t, w.operator.QueryRow(w.ctx, "SELECT created_at FROM idem.identity WHERE entry_plan = $1", id).Scan(&at))
	assert.WithinDuration(t, old, at, time.Millisecond, "entered with its original age")
}
