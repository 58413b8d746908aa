package oncitus_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/db"
)

// remoteCommands connects to the coordinator as login with
// citus.log_remote_commands on, and returns the connection and a function
// that returns (and forgets) the commands it sent to other nodes since, each
// with the port of the node it went to.
func (e *env) remoteCommands(t *testing.T, login string) (*pgx.Conn, func() []sent) {
	t.Helper()
	pcfg, err := db.Config(loginURL(e.admin, login), db.Options{})
	require.NoError(t, err)
	cfg := pcfg.ConnConfig
	var mu sync.Mutex
	var log []sent
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if m := issuing.FindStringSubmatch(n.Message + "\n" + n.Detail); m != nil {
			port, _ := strconv.Atoi(m[2])
			mu.Lock()
			log = append(log, sent{SQL: m[1], Port: port})
			mu.Unlock()
		}
	}
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	_, err = conn.Exec(context.Background(), "SET citus.log_remote_commands = on")
	require.NoError(t, err)
	return conn, func() []sent {
		mu.Lock()
		defer mu.Unlock()
		out := log
		log = nil
		return out
	}
}

// sent is one command the coordinator sent to a node.
type sent struct {
	SQL  string
	Port int
}

var issuing = regexp.MustCompile(`(?s)^issuing (.*?)\n.*on server [^@]*@[^:]*:(\d+)`)

// TestExecuteRunsOnTheTenantsNode: every call of idem.execute (alone, and in
// a transaction block) and of idem.claim and idem.complete is sent whole to
// the one node that holds its tenant's shard: the coordinator sends that
// node the call and nothing else (no statement on any shard), and never
// speaks to the other worker.
func TestExecuteRunsOnTheTenantsNode(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	conn, commands := e.remoteCommands(t, loginApp)
	for _, tenant := range e.spread(t, e.superuser(t), "one-node", 2) {
		home := workerPort(t, e.superuser(t), tenant)
		check := func(what string, want ...string) {
			t.Helper()
			got := commands()
			var calls []string
			for _, c := range got {
				assert.Equal(t, home, c.Port, "%s of %s: a command went to another node: %s", what, tenant, c.SQL)
				if !transactionControl.MatchString(c.SQL) {
					calls = append(calls, c.SQL)
				}
			}
			require.Len(t, calls, len(want), "%s of %s: commands sent %v", what, tenant, got)
			for i, w := range want {
				assert.Regexp(t, w, calls[i], "%s of %s", what, tenant)
			}
		}
		res, err := idem.Execute(ctx, conn, transfer(tenant, "op-1", 5))
		require.NoError(t, err)
		assert.Equal(t, idem.Applied, res.Outcome)
		check("execute", `FROM idem\.execute\(`)

		res, err = idem.Execute(ctx, conn, transfer(tenant, "op-1", 5))
		require.NoError(t, err)
		assert.Equal(t, idem.AlreadyApplied, res.Outcome)
		check("replay", `FROM idem\.execute\(`)

		res, err = idem.Execute(ctx, conn, transfer(tenant, "op-1", 6))
		require.NoError(t, err)
		assert.Equal(t, idem.Conflict, res.Outcome)
		check("conflict", `FROM idem\.execute\(`)

		tx, err := conn.Begin(ctx)
		require.NoError(t, err)
		_, err = idem.Execute(ctx, tx, transfer(tenant, "op-2", 5))
		require.NoError(t, err)
		require.NoError(t, tx.Commit(ctx))
		check("execute in a transaction block", `FROM idem\.execute\(`)

		cmd := transfer(tenant, "op-3", 5)
		cmd.Class = "demo.transfer_app"
		res, err = idem.ExecuteFunc(ctx, conn, cmd, func(ctx context.Context, tx pgx.Tx) (json.RawMessage, error) {
			return json.RawMessage(`{"posted":true}`), nil
		})
		require.NoError(t, err)
		assert.Equal(t, idem.Applied, res.Outcome)
		check("claim and complete", `FROM idem\.claim\(`, `idem\.complete\(`)
	}
}

// transactionControl matches what Citus sends around a delegated call.
var transactionControl = regexp.MustCompile(`(?i)^(BEGIN|COMMIT|ROLLBACK|PREPARE TRANSACTION|COMMIT PREPARED|SELECT assign_distributed_transaction_id|SET |RESET )`)

// TestConcurrentCallsOfOneIdentity is the executor's race on the cluster: 64
// concurrent calls of one identity, for tenants on both workers, the same
// payload (exactly one effect, 63 identical saved responses) and different
// payloads (one effect, every other payload quarantined, none run).
func TestConcurrentCallsOfOneIdentity(t *testing.T) {
	const callers = 64
	e := setup(t)
	ctx := context.Background()
	pool := e.pool(t, loginApp, callers)
	conns := make([]*pgxpool.Conn, callers)
	for i := range conns {
		c, err := pool.Acquire(ctx)
		require.NoError(t, err)
		conns[i] = c
		defer c.Release()
	}
	super := e.superuser(t)
	for _, tenant := range e.spread(t, super, "race", 2) {
		for _, same := range []bool{true, false} {
			op := fmt.Sprintf("same-%t", same)
			results := make([]idem.Result, callers)
			errs := make([]error, callers)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := 0; i < callers; i++ {
				amount := 7
				if !same {
					amount = 1000 + i
				}
				wg.Add(1)
				go func(i, amount int) {
					defer wg.Done()
					<-start
					results[i], errs[i] = idem.Execute(ctx, conns[i], transfer(tenant, op, amount))
				}(i, amount)
			}
			close(start)
			wg.Wait()
			applied, conflicts := 0, 0
			var winner idem.Result
			for i, r := range results {
				require.NoError(t, errs[i], "%s %s caller %d", tenant, op, i)
				switch r.Outcome {
				case idem.Applied:
					applied++
					winner = r
				case idem.Conflict:
					conflicts++
					assert.Nil(t, r.Response)
					assert.NotZero(t, r.QuarantineID)
				case idem.AlreadyApplied:
				default:
					t.Fatalf("%s %s caller %d: outcome %s", tenant, op, i, r.Outcome)
				}
			}
			require.Equal(t, 1, applied, "%s %s: exactly one call applies", tenant, op)
			for i, r := range results {
				if r.Outcome != idem.Conflict {
					assert.JSONEq(t, string(winner.Response), string(r.Response), "%s %s caller %d got another response", tenant, op, i)
				}
			}
			assert.EqualValues(t, 1, count(t, super, "SELECT count(*) FROM demo.posting WHERE tenant_id = $1 AND operation_id = $2", tenant, op),
				"%s %s: one posting", tenant, op)
			if same {
				assert.Zero(t, conflicts)
			} else {
				assert.Equal(t, callers-1, conflicts)
				assert.EqualValues(t, callers-1, count(t, super, "SELECT count(*) FROM idem.quarantine WHERE tenant_id = $1 AND operation_id = $2", tenant, op),
					"%s %s: every other payload quarantined once", tenant, op)
			}
		}
	}
}

// TestClaimWithoutCompleteIsRefusedOnTheWorker: the deferred check that
// refuses a marker without its effect runs on the worker, where the claim
// was written, and its refusal reaches the caller's COMMIT: nothing stays.
func TestClaimWithoutCompleteIsRefusedOnTheWorker(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	conn := e.conn(t, loginApp)
	for _, tenant := range e.spread(t, e.superuser(t), "unfinished", 1) {
		cmd := transfer(tenant, "op", 5)
		cmd.Class = "demo.transfer_app"
		p, err := idem.Prepare(cmd, idem.PayloadLimits{})
		require.NoError(t, err)
		tx, err := conn.Begin(ctx)
		require.NoError(t, err)
		_, claimed, err := idem.Claim(ctx, tx, p)
		require.NoError(t, err)
		require.True(t, claimed)
		err = tx.Commit(ctx)
		require.Error(t, err, "a claim without complete was committed on %s", tenant)
		t.Logf("commit refused: %v", err)
		assert.Zero(t, count(t, e.superuser(t), "SELECT count(*) FROM idem.identity WHERE tenant_id = $1", tenant))
	}
}

// TestRegisterClassChecksItsTables: on the cluster a class's effect declares
// its tables; one that is not co-located with the identities (or a
// reference table) is refused at registration, and an effect that strays
// from its tenant's shard is refused at run time, with nothing written.
func TestRegisterClassChecksItsTables(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	super := e.superuser(t)
	steps := []string{
		"CREATE ROLE citus_t_effects LOGIN",
		"CREATE SCHEMA fx AUTHORIZATION citus_t_effects",
		"GRANT USAGE ON SCHEMA fx TO idem_owner",
		"SET ROLE citus_t_effects",
		"CREATE TABLE fx.local_note (tenant_id text, note text)",
		"CREATE TABLE fx.note (tenant_id text, note text, PRIMARY KEY (tenant_id, note))",
		`CREATE FUNCTION fx.stray(t text, o text, p jsonb) RETURNS jsonb LANGUAGE sql SECURITY DEFINER
		 SET search_path = pg_catalog, fx, pg_temp AS $$ INSERT INTO fx.note VALUES (t || '-elsewhere', o) RETURNING '{}'::jsonb $$`,
		"GRANT EXECUTE ON FUNCTION fx.stray(text, text, jsonb) TO idem_owner",
		"RESET ROLE",
		"SELECT create_distributed_table('fx.note', 'tenant_id', colocate_with := 'idem.identity')",
	}
	for _, s := range steps {
		_, err := super.Exec(ctx, s)
		require.NoError(t, err, s)
	}
	register := func(tables string) error {
		_, err := super.Exec(ctx, "SET ROLE idem_owner; SELECT idem.register_class('fx.stray', 'fx.stray(text,text,jsonb)', 'forever', NULL, "+tables+"); RESET ROLE")
		_, _ = super.Exec(ctx, "RESET ROLE")
		return err
	}
	assertCode(t, "IX008", register("NULL"), "an effect without declared tables")
	assertCode(t, "IX008", register("ARRAY['fx.local_note']::regclass[]"), "a table on the coordinator only")
	require.NoError(t, register("ARRAY['fx.note']::regclass[]"))

	app := e.conn(t, loginApp)
	tenant := e.spread(t, super, "stray", 1)[0]
	_, err := idem.Execute(ctx, app, idem.Command{Identity: idem.Identity{TenantID: tenant, OperationID: "x"}, Class: "fx.stray", Payload: []byte(`{}`)})
	require.Error(t, err, "an effect writing another tenant's shard ran")
	t.Logf("stray effect refused: %v", err)
	assert.Zero(t, count(t, super, "SELECT count(*) FROM fx.note"))
	assert.Zero(t, count(t, super, "SELECT count(*) FROM idem.identity WHERE tenant_id = $1", tenant))
}

func assertCode(t *testing.T, code string, err error, what string) {
	t.Helper()
	var pgErr *pgconn.PgError
	if assert.ErrorAs(t, err, &pgErr, what) {
		assert.Equal(t, code, pgErr.Code, "%s: %s", what, pgErr.Message)
	}
}
