// Package attack_test tries, as each kind of user would with ordinary grants
// (a service's app login, an operator, an auditor, a login with nothing), every
// act that once got past the schema's rules, and checks that the database
// itself refuses it and writes nothing. Each test names the finding it guards.
package attack_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/migrations"
	"github.com/idemctl/idemctl/quarantine"
)

const projClass = "proj.view"

type world struct {
	t        *testing.T
	ctx      context.Context
	dsn      string
	app      *pgxpool.Pool
	operator *pgxpool.Pool // alice
	second   *pgxpool.Pool // bob
	auditor  *pgxpool.Pool
	nobody   *pgxpool.Pool
}

func setup(t *testing.T) *world {
	t.Helper()
	dsn := dbtest.NewDatabase(t)
	w := &world{t: t, ctx: context.Background(), dsn: dsn,
		app:      dbtest.PoolAs(t, dsn, dbtest.App, 4),
		operator: dbtest.PoolAs(t, dsn, dbtest.Operator, 4),
		second:   dbtest.PoolAs(t, dsn, dbtest.Operator2, 2),
		auditor:  dbtest.PoolAs(t, dsn, dbtest.Auditor, 2),
		nobody:   dbtest.PoolAs(t, dsn, dbtest.Nobody, 2),
	}
	dbtest.RegisterAppClass(t, dsn, projClass, "horizon")
	return w
}

func code(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

func hashOf(payload string) string {
	sum := sha256.Sum256([]byte(payload))
	return idem.HashPrefix + hex.EncodeToString(sum[:])
}

// snapshot is every row count of schema idem, read as the schema owner, so
// that "nothing was written" is checked everywhere at once.
func (w *world) snapshot() map[string]int64 {
	w.t.Helper()
	conn, err := pgx.Connect(w.ctx, dbtest.As(w.dsn, dbtest.Superuser))
	require.NoError(w.t, err)
	defer conn.Close(w.ctx)
	rows, err := conn.Query(w.ctx, `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'idem' AND c.relkind IN ('r', 'p') AND NOT c.relispartition ORDER BY 1`)
	require.NoError(w.t, err)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(w.t, err)
	out := map[string]int64{}
	for _, n := range names {
		var c int64
		require.NoError(w.t, conn.QueryRow(w.ctx, "SELECT count(*) FROM idem."+pgx.Identifier{n}.Sanitize()).Scan(&c))
		out[n] = c
	}
	return out
}

// TestNoRoleWritesATableDirectly: no login but the schema owner may INSERT,
// UPDATE, DELETE, TRUNCATE or create a TRIGGER on any idem table, column
// privileges included; the login with nothing cannot even see the schema.
func TestNoRoleWritesATableDirectly(t *testing.T) {
	t.Parallel()
	w := setup(t)
	before := w.snapshot()
	for name, pool := range map[dbtest.Role]*pgxpool.Pool{dbtest.App: w.app, dbtest.Operator: w.operator,
		dbtest.Auditor: w.auditor, dbtest.Nobody: w.nobody} {
		rows, err := pool.Query(w.ctx, `SELECT c.relname, p.priv,
		        has_table_privilege(c.oid, p.priv) OR EXISTS (
		            SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0
		              AND p.priv IN ('INSERT', 'UPDATE') AND has_column_privilege(c.oid, a.attnum, p.priv))
		    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		    CROSS JOIN unnest(ARRAY['INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'TRIGGER', 'REFERENCES']) p(priv)
		    WHERE n.nspname = 'idem' AND c.relkind IN ('r', 'p', 'v')`)
		require.NoError(t, err)
		for rows.Next() {
			var rel, priv string
			var has bool
			require.NoError(t, rows.Scan(&rel, &priv, &has))
			assert.False(t, has, "%s may %s idem.%s", name, priv, rel)
		}
		require.NoError(t, rows.Err())
		for _, sql := range []string{
			"INSERT INTO idem.quarantine (tenant_id, operation_id) VALUES ('t', 'o')",
			"UPDATE idem.inbox_body SET response = '{\"forged\":true}'",
			"UPDATE idem.identity SET created_at = created_at - interval '1 day'",
			"DELETE FROM idem.pending_claim",
			"INSERT INTO idem.audit (id, at, actor, db_user, action, details, prev_hash, hash) VALUES (1, now(), 'a', 'b', 'c.d', '{}', 'x', 'y')",
			"UPDATE idem.horizon_plan SET state = 'done'",
			"INSERT INTO idem.person_login (login_pattern, person, created_by) VALUES ('*x', 'alice', 'me')",
			"TRUNCATE idem.inbox_body_default",
			"UPDATE idem.op_class SET retention = 'horizon'",
		} {
			_, err := pool.Exec(w.ctx, sql)
			assert.Equal(t, "42501", code(err), "%s: %s: %v", name, sql, err)
		}
	}
	var usage bool
	require.NoError(t, w.nobody.QueryRow(w.ctx, "SELECT has_schema_privilege('idem', 'USAGE')").Scan(&usage))
	assert.False(t, usage, "a login with no grant cannot even reach the schema")
	assert.Equal(t, before, w.snapshot(), "nothing was written")
}

// TestEveryFunctionIsGrantedAsDeclared: PUBLIC executes nothing; the app role
// executes idem.execute, idem.claim and idem.complete, and idem.database_id
// (which names the database in a service's replies, and reads nothing else),
// and nothing else; every
// internal function is refused to every role when called directly.
func TestEveryFunctionIsGrantedAsDeclared(t *testing.T) {
	t.Parallel()
	w := setup(t)
	conn, err := pgx.Connect(w.ctx, dbtest.As(w.dsn, dbtest.Superuser))
	require.NoError(t, err)
	defer conn.Close(w.ctx)
	problems, err := migrations.Check(w.ctx, conn, migrations.DefaultRoles())
	require.NoError(t, err)
	assert.Empty(t, problems)

	rows, err := w.app.Query(w.ctx, `SELECT p.oid::regprocedure::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE n.nspname = 'idem' AND has_function_privilege(p.oid, 'EXECUTE') ORDER BY 1`)
	require.NoError(t, err)
	appFns, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	assert.Equal(t, []string{
		"idem.claim(text,text,text,text,text,jsonb)",
		"idem.complete(text,text,jsonb)",
		"idem.database_id()",
		"idem.execute(text,text,text,text,text,jsonb)",
	}, appFns, "the app role executes the executor (and reads the database identity) and nothing else")

	before := w.snapshot()
	// Every function a role is not granted, called with NULL arguments of
	// its own types: refused before it runs (trigger functions cannot be
	// called at all; a STRICT function given NULLs is folded to NULL by the
	// planner, never run, so it gets no NULLs).
	for role, pool := range map[dbtest.Role]*pgxpool.Pool{dbtest.App: w.app, dbtest.Operator: w.operator,
		dbtest.Auditor: w.auditor, dbtest.Nobody: w.nobody} {
		rows, err := conn.Query(w.ctx, `SELECT format('SELECT %s(%s)', p.oid::regproc,
		            coalesce((SELECT string_agg(format('NULL::%s', t::regtype), ', ' ORDER BY i)
		                      FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY u(t, i)), ''))
		    FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		    WHERE n.nspname = 'idem' AND p.prorettype <> 'trigger'::regtype AND NOT p.proisstrict
		      AND NOT has_function_privilege($1, p.oid, 'EXECUTE')`, string(role))
		require.NoError(t, err)
		calls, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		assert.NotEmpty(t, calls)
		for _, sql := range calls {
			_, err := pool.Exec(w.ctx, sql)
			assert.Equal(t, "42501", code(err), "%s: %s: %v", role, sql, err)
		}
	}
	assert.Equal(t, before, w.snapshot(), "nothing was written")
}

// Finding 1: a purge function called with no plan, or a plan not purging,
// deletes nothing; nor does one pointed at a table that is not a day of the
// inbox.
func TestPurgeFunctionsNeedAPurgingPlan(t *testing.T) {
	t.Parallel()
	w := setup(t)
	dbtest.Seed(t, w.dsn, projClass, "t1", "op-", 50, 3*24*time.Hour, time.Minute)
	var part string
	require.NoError(t, w.operator.QueryRow(w.ctx, `SELECT part::text FROM idem.inbox_body_partitions()
		WHERE NOT is_default AND upper_bound <= now() - interval '2 days' ORDER BY lower_bound DESC LIMIT 1`).Scan(&part))
	p, err := horizon.MakePlan(w.ctx, w.operator, horizon.PlanOptions{Class: projClass, Before: time.Now().Add(-24 * time.Hour), Operator: "alice", AcceptUnbounded: true})
	require.NoError(t, err)
	before := w.snapshot()
	for _, tc := range []struct {
		sql  string
		args []any
		want string
	}{
		{"SELECT * FROM idem.horizon_purge_swap(424242, $1::regclass, 0.5)", []any{part}, "IX301"},
		{"SELECT idem.horizon_purge_blocks(424242, $1::regclass, 0, 100000)", []any{part}, "IX301"},
		{"SELECT idem.horizon_drop_tombstones_blocks(424242, 0, 100000)", nil, "IX301"},
		{"SELECT * FROM idem.horizon_purge_swap($1, $2::regclass, 0.5)", []any{p.ID, part}, "IX302"},
		{"SELECT idem.horizon_purge_blocks($1, $2::regclass, 0, 100000)", []any{p.ID, part}, "IX302"},
		{"SELECT idem.horizon_purge_finish($1, 'alice', '{}')", []any{p.ID}, "IX302"},
	} {
		_, err := w.operator.Exec(w.ctx, tc.sql, tc.args...)
		assert.Equal(t, tc.want, code(err), "%s: %v", tc.sql, err)
	}
	assert.Equal(t, before, w.snapshot(), "nothing was written")
	// Approved, and even begun by another session: this one is not its runner.
	_, err = horizon.Approve(w.ctx, w.second, p.ID, "bob")
	require.NoError(t, err)
	runner, err := pgx.Connect(w.ctx, dbtest.As(w.dsn, dbtest.Operator))
	require.NoError(t, err)
	defer runner.Close(w.ctx)
	_, err = runner.Exec(w.ctx, "SELECT idem.horizon_purge_begin($1, 'alice', '[]')", p.ID)
	require.NoError(t, err)
	before = w.snapshot()
	for _, sql := range []string{
		"SELECT idem.horizon_purge_blocks($1, $2::regclass, 0, 100000)",
		"SELECT * FROM idem.horizon_purge_swap($1, $2::regclass, 0.5)",
	} {
		_, err := w.operator.Exec(w.ctx, sql, p.ID, part)
		assert.Equal(t, "IX310", code(err), "%s: %v", sql, err)
	}
	_, err = w.operator.Exec(w.ctx, "SELECT idem.horizon_purge_finish($1, 'alice', '{}')", p.ID)
	assert.Equal(t, "IX310", code(err))
	_, err = horizon.Purge(w.ctx, w.operator, p.ID, horizon.PurgeOptions{Operator: "alice"})
	assert.ErrorIs(t, err, horizon.ErrPurgeRunning, "one purge of a plan at a time")
	// The runner itself may not point a batch at another table.
	_, err = runner.Exec(w.ctx, "SELECT idem.horizon_purge_blocks($1, 'idem.quarantine'::regclass, 0, 100000)", p.ID)
	assert.Equal(t, "IX302", code(err))
	// Aborted meanwhile: its own runner's next batch deletes nothing.
	_, err = horizon.Cancel(w.ctx, w.second, p.ID, "bob", "wrong cutoff")
	require.NoError(t, err)
	_, err = runner.Exec(w.ctx, "SELECT idem.horizon_purge_blocks($1, $2::regclass, 0, 100000)", p.ID, part)
	assert.Equal(t, "IX302", code(err))
	after := w.snapshot()
	assert.Equal(t, before["inbox_body"], after["inbox_body"], "no body was purged")
	assert.Equal(t, before["identity"], after["identity"])
}

// Finding 2: aborting a plan stops a running purge at its next batch; the
// plan ends aborted, never done.
func TestAbortStopsARunningPurge(t *testing.T) {
	t.Parallel()
	w := setup(t)
	dbtest.Seed(t, w.dsn, projClass, "t1", "op-", 400, 3*24*time.Hour, time.Second)
	p, err := horizon.MakePlan(w.ctx, w.operator, horizon.PlanOptions{Class: projClass, Before: time.Now().Add(-24 * time.Hour), Operator: "alice", AcceptUnbounded: true})
	require.NoError(t, err)
	_, err = horizon.Approve(w.ctx, w.second, p.ID, "bob")
	require.NoError(t, err)
	var once sync.Once
	res, err := horizon.Purge(w.ctx, w.operator, p.ID, horizon.PurgeOptions{Operator: "alice", BatchRows: 20, KeepRatio: -1,
		Progress: func(done, total int64) {
			once.Do(func() {
				_, cerr := horizon.Cancel(w.ctx, w.second, p.ID, "bob", "stop: the DLQ owner found more messages")
				require.NoError(t, cerr)
			})
		}})
	require.ErrorIs(t, err, horizon.ErrPlanState)
	assert.Contains(t, err.Error(), "aborted by bob")
	got, err := horizon.GetPlan(w.ctx, w.operator, p.ID)
	require.NoError(t, err)
	assert.Equal(t, horizon.StateAborted, got.State)
	assert.Less(t, got.Purged, int64(400), "it stopped")
	assert.Equal(t, res.Purged, got.Purged)
	var finished int64
	require.NoError(t, w.operator.QueryRow(w.ctx, "SELECT count(*) FROM idem.audit WHERE action = 'horizon.purge.finish'").Scan(&finished))
	assert.Zero(t, finished)
	assert.Equal(t, 400-got.Purged, w.snapshot()["inbox_body"])
}

// Finding 3: a conflict recorded while a purge runs, in a transaction that
// commits before the body's deletion would, keeps the body; the original
// payload is still answered with its saved response.
func TestConflictDuringPurgeKeepsItsEvidence(t *testing.T) {
	t.Parallel()
	for _, swap := range []bool{false, true} {
		t.Run(fmt.Sprintf("swap=%v", swap), func(t *testing.T) {
			t.Parallel()
			w := setup(t)
			dbtest.Seed(t, w.dsn, projClass, "t1", "op-", 30, 3*24*time.Hour, time.Second)
			p, err := horizon.MakePlan(w.ctx, w.operator, horizon.PlanOptions{Class: projClass, Before: time.Now().Add(-24 * time.Hour), Operator: "alice", AcceptUnbounded: true})
			require.NoError(t, err)
			_, err = horizon.Approve(w.ctx, w.second, p.ID, "bob")
			require.NoError(t, err)

			// The conflicting retry's transaction stays open across the purge's start.
			tx, err := w.app.Begin(w.ctx)
			require.NoError(t, err)
			defer tx.Rollback(w.ctx)
			var outcome string
			require.NoError(t, tx.QueryRow(w.ctx, "SELECT outcome FROM idem.claim('t1', 'op-3', $1, '{\"n\":999}', $2)",
				projClass, hashOf(`{"n":999}`)).Scan(&outcome))
			require.Equal(t, "conflict", outcome)

			ratio := -1.0
			if swap {
				ratio = 0.9
			}
			done := make(chan error, 1)
			go func() {
				_, err := horizon.Purge(w.ctx, w.operator, p.ID, horizon.PurgeOptions{Operator: "alice", KeepRatio: ratio})
				done <- err
			}()
			time.Sleep(time.Second)
			require.NoError(t, tx.Commit(w.ctx))
			require.NoError(t, <-done)

			var body int64
			require.NoError(t, w.operator.QueryRow(w.ctx, "SELECT count(*) FROM idem.inbox WHERE tenant_id = 't1' AND operation_id = 'op-3'").Scan(&body))
			assert.EqualValues(t, 1, body, "the quarantined identity keeps its body")
			assert.EqualValues(t, 1, w.snapshot()["inbox_body"], "everything else was purged")
			var status string
			require.NoError(t, w.operator.QueryRow(w.ctx, "SELECT status FROM idem.quarantine WHERE operation_id = 'op-3'").Scan(&status))
			assert.Equal(t, "open", status)
			res, err := idem.ExecuteFunc(w.ctx, w.app, idem.Command{Identity: idem.Identity{TenantID: "t1", OperationID: "op-3"},
				Class: projClass, Payload: []byte(`{"n":3}`)}, func(context.Context, pgx.Tx) (json.RawMessage, error) {
				t.Error("the original ran again")
				return nil, nil
			})
			require.NoError(t, err)
			assert.Equal(t, idem.AlreadyApplied, res.Outcome)
			assert.JSONEq(t, `{"ok":true}`, string(res.Response), "the saved response, not purged")
		})
	}
}

// Finding 4: a service's login cannot forge a decision, rewrite another
// tenant's response or detach an identity from its body.
func TestAppCannotForgeOrRewrite(t *testing.T) {
	t.Parallel()
	w := setup(t)
	cmd := idem.Command{Identity: idem.Identity{TenantID: "victim", OperationID: "pay-1"}, Class: "demo.transfer",
		Payload: []byte(`{"from":"a","to":"b","amount":100,"currency":"EUR"}`)}
	first, err := idem.Execute(w.ctx, w.app, cmd)
	require.NoError(t, err)
	before := w.snapshot()
	for _, sql := range []string{
		`INSERT INTO idem.quarantine (tenant_id, operation_id, incoming_hash, incoming_class, op_class, stored_hash,
		    incoming_payload, diff, holds_on, status, decided_at, decided_by, decided_db_user, decision_reason, decision_audit_id)
		 VALUES ('victim', 'pay-1', 'jcs-sha256:` + strings.Repeat("a", 64) + `', 'demo.transfer', 'demo.transfer',
		    'jcs-sha256:` + strings.Repeat("b", 64) + `', '{}', '[]', 'body', 'rejected', now(), 'alice', 'alice', 'x', 1)`,
		`UPDATE idem.inbox_body SET response = '{"posting_id":"forged"}' WHERE tenant_id = 'victim'`,
		`UPDATE idem.identity SET created_at = created_at - interval '1 hour' WHERE tenant_id = 'victim'`,
		`SELECT * FROM idem.inbox`,
		`SELECT * FROM idem.quarantine`,
	} {
		_, err := w.app.Exec(w.ctx, sql)
		assert.Equal(t, "42501", code(err), "%s: %v", sql, err)
	}
	assert.Equal(t, before, w.snapshot())
	again, err := idem.Execute(w.ctx, w.app, cmd)
	require.NoError(t, err)
	assert.Equal(t, idem.AlreadyApplied, again.Outcome)
	assert.JSONEq(t, string(first.Response), string(again.Response))
}

// Finding 5: an operator can decide only through the decision functions,
// which write their own audit row; an "accepted" without its execution cannot
// be made.
func TestOperatorCannotForgeADecision(t *testing.T) {
	t.Parallel()
	w := setup(t)
	_, err := idem.Execute(w.ctx, w.app, idem.Command{Identity: idem.Identity{TenantID: "t", OperationID: "o"}, Class: "demo.transfer",
		Payload: []byte(`{"from":"a","to":"b","amount":1,"currency":"EUR"}`)})
	require.NoError(t, err)
	res, err := idem.Execute(w.ctx, w.app, idem.Command{Identity: idem.Identity{TenantID: "t", OperationID: "o"}, Class: "demo.transfer",
		Payload: []byte(`{"from":"a","to":"b","amount":2,"currency":"EUR"}`)})
	require.NoError(t, err)
	require.Equal(t, idem.Conflict, res.Outcome)
	before := w.snapshot()
	tx, err := w.operator.Begin(w.ctx)
	require.NoError(t, err)
	_, err = tx.Exec(w.ctx, "SELECT set_config('idem.decision_path', 'on', true)")
	require.NoError(t, err)
	_, err = tx.Exec(w.ctx, `UPDATE idem.quarantine SET status = 'accepted', new_operation_id = 'o-2', new_outcome = 'applied'`)
	assert.Equal(t, "42501", code(err))
	require.NoError(t, tx.Rollback(w.ctx))
	_, err = w.operator.Exec(w.ctx, "SELECT idem.audit_append('alice', 'quarantine.accept_as_new', $1, '{}')", fmt.Sprintf("quarantine:%d", res.QuarantineID))
	assert.Equal(t, "IX113", code(err))
	assert.Equal(t, before, w.snapshot())
	// The real decision writes both, together.
	rec, err := quarantine.Reject(w.ctx, w.operator, res.QuarantineID, "alice", "client bug")
	require.NoError(t, err)
	require.NotNil(t, rec.Decision)
	var action, person string
	require.NoError(t, w.operator.QueryRow(w.ctx, "SELECT action, person FROM idem.audit WHERE id = $1", rec.Decision.AuditID).Scan(&action, &person))
	assert.Equal(t, "quarantine.reject", action)
	assert.Equal(t, dbtest.PersonOperator, person)
}

// Finding 7: a role that owns a schema earlier in the caller's search_path
// cannot shadow what the functions call (now(), and anything else).
func TestSearchPathCannotShadowFunctions(t *testing.T) {
	t.Parallel()
	w := setup(t)
	dbtest.Admin(t, w.dsn, `CREATE SCHEMA evil AUTHORIZATION idemctl_test_operator;
		CREATE FUNCTION evil.now() RETURNS timestamptz LANGUAGE sql AS $$ SELECT '2020-01-01'::timestamptz $$;
		CREATE FUNCTION evil.pg_trigger_depth() RETURNS integer LANGUAGE sql AS $$ SELECT 5 $$;
		GRANT USAGE ON SCHEMA evil TO PUBLIC; GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA evil TO PUBLIC`)
	conn, err := pgx.Connect(w.ctx, dbtest.As(w.dsn, dbtest.Operator))
	require.NoError(t, err)
	defer conn.Close(w.ctx)
	_, err = conn.Exec(w.ctx, "SET search_path = evil, pg_catalog, public")
	require.NoError(t, err)
	var shadowed time.Time
	require.NoError(t, conn.QueryRow(w.ctx, "SELECT now()").Scan(&shadowed))
	require.Equal(t, 2020, shadowed.Year(), "the session itself sees the impostor")
	var at time.Time
	require.NoError(t, conn.QueryRow(w.ctx, "SELECT at FROM idem.audit_append('alice', 'resolve.run', '', '{}')").Scan(&at))
	assert.WithinDuration(t, time.Now(), at, time.Hour, "the function used the real now()")
}

// Finding 8: four-eyes compares persons: the same login cannot plan and
// approve under two labels, and a login with no person can do neither.
func TestFourEyesComparesPersons(t *testing.T) {
	t.Parallel()
	w := setup(t)
	dbtest.Seed(t, w.dsn, projClass, "t1", "op-", 5, 3*24*time.Hour, time.Minute)
	p, err := horizon.MakePlan(w.ctx, w.operator, horizon.PlanOptions{Class: projClass, Before: time.Now().Add(-24 * time.Hour), Operator: "alice", AcceptUnbounded: true})
	require.NoError(t, err)
	assert.Equal(t, dbtest.PersonOperator, p.PlannedPerson)
	for _, label := range []string{"not-alice", "ALICE", "root"} {
		_, err = horizon.Approve(w.ctx, w.operator, p.ID, label)
		assert.ErrorIs(t, err, horizon.ErrSameOperator, label)
	}
	unmapped := dbtest.PoolAs(t, w.dsn, dbtest.Unmapped, 2)
	_, err = horizon.Approve(w.ctx, unmapped, p.ID, "carol")
	assert.ErrorIs(t, err, horizon.ErrNoPerson)
	_, err = horizon.MakePlan(w.ctx, unmapped, horizon.PlanOptions{Class: projClass, Before: time.Now().Add(-24 * time.Hour), Operator: "carol", AcceptUnbounded: true})
	assert.ErrorIs(t, err, horizon.ErrNoPerson)
	// A second login of alice's is still alice.
	require.NoError(t, dbtest.Owner(w.dsn, "SELECT idem.person_add('alice', 'idemctl_test_unm*')"))
	_, err = horizon.Approve(w.ctx, unmapped, p.ID, "carol")
	assert.ErrorIs(t, err, horizon.ErrSameOperator)
	got, err := horizon.Approve(w.ctx, w.second, p.ID, "bob")
	require.NoError(t, err)
	assert.Equal(t, horizon.StateApproved, got.State)
	assert.Equal(t, dbtest.PersonOperator2, got.ApprovedPerson)
	// Only the schema owner maps logins.
	_, err = w.operator.Exec(w.ctx, "SELECT idem.person_add('mallory', 'idemctl_test_operator2')")
	assert.Equal(t, "42501", code(err))
}

// Finding 9: a claim cannot be committed without its completion, whatever
// the caller tries to delete.
func TestClaimCannotCommitWithoutCompletion(t *testing.T) {
	t.Parallel()
	w := setup(t)
	tx, err := w.app.Begin(w.ctx)
	require.NoError(t, err)
	defer tx.Rollback(w.ctx)
	var outcome string
	require.NoError(t, tx.QueryRow(w.ctx, "SELECT outcome FROM idem.claim('t', 'marker', $1, '{\"a\":1}', $2)", projClass, hashOf(`{"a":1}`)).Scan(&outcome))
	require.Equal(t, "claimed", outcome)
	_, err = tx.Exec(w.ctx, "SAVEPOINT s")
	require.NoError(t, err)
	_, err = tx.Exec(w.ctx, "DELETE FROM idem.pending_claim")
	assert.Equal(t, "42501", code(err))
	_, err = tx.Exec(w.ctx, "ROLLBACK TO SAVEPOINT s")
	require.NoError(t, err)
	_, err = tx.Exec(w.ctx, "SET CONSTRAINTS ALL IMMEDIATE")
	assert.Equal(t, "IX009", code(err), "checking early refuses too")
	err = tx.Commit(w.ctx)
	assert.Error(t, err)
	assert.Zero(t, w.snapshot()["identity"], "no marker without its effect")
}

// Finding 10: the hash cannot lie: the database recomputes it, on every
// path, and refuses a mismatch writing nothing.
func TestHashCannotLie(t *testing.T) {
	t.Parallel()
	w := setup(t)
	real := `{"amount":100,"currency":"EUR","from":"a","to":"b"}`
	lie := `{"amount":999999,"currency":"EUR","from":"a","to":"b"}`
	before := w.snapshot()
	_, err := w.app.Exec(w.ctx, "SELECT * FROM idem.execute('t', 'x-1', 'demo.transfer', $1, $2)", real, hashOf(lie))
	assert.Equal(t, "IX010", code(err))
	_, err = w.app.Exec(w.ctx, "SELECT * FROM idem.claim('t', 'x-1', $1, $2, $3)", projClass, real, hashOf(lie))
	assert.Equal(t, "IX010", code(err))
	assert.Equal(t, before, w.snapshot(), "nothing written")
	// A replay with a lying hash is refused too, not answered.
	_, err = w.app.Exec(w.ctx, "SELECT * FROM idem.execute('t', 'x-1', 'demo.transfer', $1, $2)", real, hashOf(real))
	require.NoError(t, err)
	_, err = w.app.Exec(w.ctx, "SELECT * FROM idem.execute('t', 'x-1', 'demo.transfer', $1, $2)", lie, hashOf(real))
	assert.Equal(t, "IX010", code(err))
	var stored string
	require.NoError(t, w.operator.QueryRow(w.ctx, "SELECT payload_hash FROM idem.inbox WHERE operation_id = 'x-1'").Scan(&stored))
	assert.Equal(t, hashOf(real), stored)
}

// Findings 12 and 13: control characters in free text, and payloads over the
// limits, are refused by the database itself.
func TestHostileTextAndPayloadLimits(t *testing.T) {
	t.Parallel()
	w := setup(t)
	before := w.snapshot()
	hostile := "\x1b]0;pwned\x07\x1b[2J"
	for _, tc := range []struct {
		sql  string
		args []any
		want string
	}{
		{"SELECT idem.horizon_correction_add('t', 'o', $1, 'alice')", []any{"fix " + hostile}, "IX307"},
		{"SELECT idem.horizon_correction_add('t', 'o', 'fix', $1)", []any{"alice" + hostile}, "IX307"},
		{"SELECT idem.audit_append($1, 'resolve.run', '', '{}')", []any{hostile}, "IX111"},
		{"SELECT idem.horizon_source_add($1, 'archive', '{\"dir\":\"/x\"}', '30s', 'alice')", []any{"s" + hostile}, "IX308"},
		{"SELECT idem.class_set('demo.transfer', 'forever', NULL, false, $1, NULL)", []any{hostile}, "IX015"},
	} {
		_, err := w.operator.Exec(w.ctx, tc.sql, tc.args...)
		assert.Equal(t, tc.want, code(err), "%s: %v", tc.sql, err)
	}
	big := `"` + strings.Repeat("a", 20<<20) + `"`
	deep := strings.Repeat("[", 5000) + strings.Repeat("]", 5000)
	for _, payload := range []string{big, deep} {
		_, err := w.app.Exec(w.ctx, "SELECT * FROM idem.execute('t', 'big', 'demo.transfer', $1, $2)", payload, hashOf(payload))
		assert.Equal(t, "IX011", code(err))
	}
	assert.Equal(t, before, w.snapshot())
}

// Finding 11: a source's config never stores a secret.
func TestSourceSecretsAreNeverStored(t *testing.T) {
	t.Parallel()
	w := setup(t)
	before := w.snapshot()
	for _, cfg := range []string{
		`{"dsn":"postgres://root:Hunter2Secret@db/x","query":"SELECT 1"}`,
		`{"dsn":"host=db sslpassword=Hunter2Secret","query":"SELECT 1"}`,
		`{"dsn":"postgress://root:Hunter2Secret@db/x","query":"SELECT 1"}`,
		`{"dsn":"host=db","query":"SELECT 1","password":"Hunter2Secret"}`,
	} {
		_, err := w.operator.Exec(w.ctx, "SELECT idem.horizon_source_add('dlq', 'postgres', $1, '30s', 'alice')", cfg)
		assert.Equal(t, "IX311", code(err), cfg)
		assert.NotContains(t, fmt.Sprint(err), "Hunter2", "the refusal does not echo it")
	}
	err := horizon.AddSource(w.ctx, w.operator, horizon.Source{Name: "dlq", Kind: horizon.KindPostgres,
		Config: horizon.SourceConfig{DSN: "postgres://root:Hunter2Secret@db/x", Query: "SELECT 1"}}, "alice")
	assert.ErrorIs(t, err, horizon.ErrSecretInConfig)
	assert.NotContains(t, err.Error(), "Hunter2")
	assert.Equal(t, before, w.snapshot())
}

// approveImport approves import plan id on pool (as label) the way idemctl
// import approve does, in one transaction: the rows the approver read again
// from the source (each in the run stage's columns: tenant, operation,
// payload, payload hash, response, created_at, store hash, evidence) into
// pg_temp.idem_import_check, all but the payload (its hash stands for it),
// then idem.import_plan_approve.
func (w *world) approveImport(pool *pgxpool.Pool, id int64, label string, rows ...[]any) error {
	w.t.Helper()
	tx, err := pool.Begin(w.ctx)
	require.NoError(w.t, err)
	defer func() { _ = tx.Rollback(w.ctx) }()
	if _, err := tx.Exec(w.ctx, "SELECT idem.import_check_open($1)", id); err != nil {
		return err
	}
	for _, r := range rows {
		args := append(append([]any{}, r[:2]...), r[3:]...)
		if _, err := tx.Exec(w.ctx, "INSERT INTO pg_temp.idem_import_check VALUES ($1, $2, $3, $4, $5, $6, $7)", args...); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(w.ctx, "SELECT idem.import_plan_approve($1, $2)", id, label); err != nil {
		return err
	}
	return tx.Commit(w.ctx)
}

// approveAsBefore marks import plan id approved by bob as the schema owner
// would have before approvals read the source (a plan that keeps only its
// planner's digest of its items is no longer approved: it cannot be checked).
func (w *world) approveAsBefore(id int64) {
	w.t.Helper()
	conn, err := pgx.Connect(w.ctx, dbtest.As(w.dsn, dbtest.Superuser))
	require.NoError(w.t, err)
	defer conn.Close(w.ctx)
	_, err = conn.Exec(w.ctx, `UPDATE idem.entry_plan SET state = 'approved', approved_at = now(), approved_by = 'bob',
		approved_person = 'bob', approved_db_user = 'idemctl_test_operator2' WHERE id = $1 AND state = 'planned'`, id)
	require.NoError(w.t, err)
}
