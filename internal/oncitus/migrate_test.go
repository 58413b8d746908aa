package oncitus_test

import (
	"context"
	"fmt"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/audit"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/migrations"
)

// TestMigrateDistributesAnInboxThatHoldsData: migrate on a coordinator whose
// idem tables already hold 100,000 identities, conflicts and decisions
// distributes them, says what it did and how long each table was locked,
// and loses nothing: every identity still answers, every record keeps its
// id and state, the audit chain still verifies.
func TestMigrateDistributesAnInboxThatHoldsData(t *testing.T) {
	e := setup(t)
	g := e.grown
	t.Logf("distributing the grown inbox took %s", g.took)
	for _, line := range g.report.Citus.Summary() {
		t.Log(line)
	}
	require.NotNil(t, g.report.Citus, "migrate on a coordinator reports what it did for Citus")
	kinds := map[string]string{}
	for _, tb := range g.report.Citus.Tables {
		kinds[tb.Table] = tb.Kind
		if tb.Table == "idem.identity" {
			assert.EqualValues(t, g.before.Identities, tb.Rows, "the report counts the identities it copied")
		}
	}
	for table, kind := range map[string]string{"idem.identity": "distributed", "idem.inbox_body": "distributed",
		"idem.quarantine": "distributed", "idem.pending_claim": "distributed", "idem.op_class": "reference",
		"idem.horizon_plan": "reference", "idem.audit": "local", "idem.audit_head": "local"} {
		assert.Equal(t, kind, kinds[table], "%s", table)
	}
	assert.ElementsMatch(t, []string{"idem.execute(text,text,text,text,text,jsonb)", "idem.claim(text,text,text,text,text,jsonb)",
		"idem.complete(text,text,jsonb)"}, g.report.Citus.Delegated)

	assert.EqualValues(t, grownIdentities+grownConflicts, g.before.Identities)
	assert.Equal(t, g.before, g.after, "what the inbox holds, before and after distributing")
	assert.EqualValues(t, grownConflicts, g.after.Quarantine)
	assert.EqualValues(t, grownRejected, g.after.Rejected)

	conn := e.superuser(t)
	ctx := context.Background()
	for _, w := range e.c.Workers()[:2] {
		n := count(t, conn, `SELECT count(*) FROM idem.identity i
			JOIN citus_shards s ON s.shardid = get_shard_id_for_distribution_column('idem.identity', i.tenant_id)
			WHERE s.nodeport = $1 AND i.operation_id LIKE 'hist-%'`, w.Port)
		t.Logf("%s holds %d of the grown identities", w.Name, n)
		assert.Positive(t, n, "%s holds some of the identities", w.Name)
	}
	// Every identity still answers: each has its body, through the coordinator
	// (other tests of the binary may have added their own since).
	assert.Equal(t, g.before.Identities, count(t, conn,
		"SELECT count(*) FROM idem.inbox WHERE operation_id LIKE 'hist-%' OR operation_id LIKE 'live-%'"))
	// A sample replayed through the executor gets its saved response.
	app := e.conn(t, loginApp)
	rng := rand.New(rand.NewSource(11))
	for i := 0; i < 50; i++ {
		n := 1 + rng.Intn(grownIdentities)
		cmd := idem.Command{Identity: idem.Identity{TenantID: fmt.Sprintf("g%02d", n%grownTenants), OperationID: fmt.Sprintf("hist-%d", n)},
			Class: "demo.transfer", Payload: []byte(fmt.Sprintf(`{"to":"b","from":"a","currency":"EUR","amount":%d}`, n))}
		res, err := idem.Execute(ctx, app, cmd)
		require.NoError(t, err, "%s", cmd.Identity)
		assert.Equal(t, idem.AlreadyApplied, res.Outcome, "%s", cmd.Identity)
		assert.JSONEq(t, `{"ok":true}`, string(res.Response), "%s", cmd.Identity)
	}
	// The audit chain: the same rows, still one chain that verifies.
	rep, err := audit.Verify(ctx, e.conn(t, loginAuditor))
	require.NoError(t, err)
	require.NoError(t, rep.Err())
	after, err := auditHashes(ctx, conn)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(after), len(g.audit))
	assert.Equal(t, g.audit, after[:len(g.audit)], "the chain's rows from before are unchanged")
}

// TestMigrateAgainChangesNothing: a second migrate on the coordinator finds
// everything in place (and its privilege check passes).
func TestMigrateAgainChangesNothing(t *testing.T) {
	e := setup(t)
	conn := e.superuser(t)
	rep, err := migrations.Apply(context.Background(), conn, migrations.Options{})
	require.NoError(t, err)
	require.NotNil(t, rep.Citus)
	assert.Empty(t, rep.Citus.Tables)
	assert.Empty(t, rep.Citus.Delegated)
	assert.Empty(t, rep.Citus.Propagated)
	assert.Empty(t, rep.CodeInstalled)
	problems, err := migrations.Check(context.Background(), conn, migrations.DefaultRoles())
	require.NoError(t, err)
	assert.Empty(t, problems)
}

// TestLayoutIsColocatedByTenant: what Citus holds is what the layout says:
// the per-operation tables (every day partition of the bodies too) and the
// demo ledger share idem.identity's co-location group; the executor's
// functions are delegated on tenant_id with force_delegation.
func TestLayoutIsColocatedByTenant(t *testing.T) {
	e := setup(t)
	conn := e.superuser(t)
	ctx := context.Background()
	rows, err := conn.Query(ctx, `
		SELECT logicalrelid::text FROM pg_dist_partition
		WHERE partmethod = 'h'
		  AND colocationid IS DISTINCT FROM (SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = 'idem.identity'::regclass)`)
	require.NoError(t, err)
	strays, err := collectStrings(rows)
	require.NoError(t, err)
	assert.Empty(t, strays, "distributed tables outside idem.identity's co-location group")
	parts := count(t, conn, `SELECT count(*) FROM pg_inherits h JOIN pg_dist_partition d ON d.logicalrelid = h.inhrelid
		WHERE h.inhparent = 'idem.inbox_body'::regclass AND d.partmethod = 'h'`)
	all := count(t, conn, "SELECT count(*) FROM pg_inherits WHERE inhparent = 'idem.inbox_body'::regclass")
	assert.Equal(t, all, parts, "every day partition is distributed")
	assert.Greater(t, all, int64(5))
	for _, table := range []string{"demo.account", "demo.posting"} {
		assert.EqualValues(t, 1, count(t, conn, "SELECT count(*) FROM pg_dist_partition WHERE logicalrelid = $1::regclass AND partmethod = 'h'", table), table)
	}
	for _, fn := range []string{"idem.execute(text,text,text,text,text,jsonb)", "idem.claim(text,text,text,text,text,jsonb)", "idem.complete(text,text,jsonb)"} {
		assert.EqualValues(t, 1, count(t, conn, `SELECT count(*) FROM pg_dist_object o
			WHERE o.objid = $1::regprocedure AND o.distribution_argument_index = 0 AND o.force_delegation
			  AND o.colocationid = (SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = 'idem.identity'::regclass)`, fn), fn)
	}
	// A partition made later (tomorrow's, by horizon maintain) is distributed too.
	op := e.conn(t, loginOperator)
	_, err = op.Exec(ctx, "SELECT idem.inbox_body_ensure((now() + interval '20 days')::date, (now() + interval '21 days')::date)")
	require.NoError(t, err)
	for _, day := range []string{"20 days", "21 days"} {
		assert.EqualValues(t, 1, count(t, conn, `SELECT count(*) FROM pg_dist_partition
			WHERE logicalrelid = to_regclass('idem.inbox_body_p' || to_char(now() + $1::interval, 'YYYYMMDD'))
			  AND partmethod = 'h'`, day), "the partition made for in %s is distributed", day)
	}
}

func collectStrings(rows interface {
	Next() bool
	Scan(...any) error
	Err() error
	Close()
}) ([]string, error) {
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// TestIdentityRowValidUpgradeOnTheCluster: migrations 019-022 on an
// inbox already distributed (the three CHECKs of before put back on every
// shard): the function reaches the workers, the one CHECK is validated on
// every shard, the executor still runs on the tenant's node, and a bad row
// from the owner is refused on the worker that holds it.
func TestIdentityRowValidUpgradeOnTheCluster(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	conn := e.superuser(t)
	for _, sql := range []string{
		"SET ROLE idem_owner",
		"ALTER TABLE idem.identity DROP CONSTRAINT identity_row_valid",
		`ALTER TABLE idem.identity ADD CONSTRAINT identity_valid CHECK (
		    octet_length(tenant_id) BETWEEN 1 AND 128 AND octet_length(operation_id) BETWEEN 1 AND 256
		    AND tenant_id !~ '[\x01-\x1f\x7f-\x9f]' AND operation_id !~ '[\x01-\x1f\x7f-\x9f]')`,
		"ALTER TABLE idem.identity ADD CONSTRAINT identity_digest_form CHECK (octet_length(payload_digest) = 32)",
		"ALTER TABLE idem.identity ADD CONSTRAINT identity_holds_check CHECK (holds >= 0)",
		"DROP FUNCTION idem.identity_row_valid(text, text, bytea, integer)",
		"DELETE FROM idem.schema_migrations WHERE version BETWEEN 19 AND 22",
		"RESET ROLE",
	} {
		_, err := conn.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
	rep, err := migrations.Apply(ctx, conn, migrations.Options{})
	require.NoError(t, err)
	require.Len(t, rep.Applied, 4)
	assert.Equal(t, 22, rep.Applied[3].Version)
	var shards, valid int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE result = '1')
		FROM run_command_on_shards('idem.identity',
		    $$SELECT count(*) FROM pg_constraint WHERE conrelid = '%s'::regclass AND contype = 'c'
		      AND conname LIKE 'identity_row_valid%%' AND convalidated$$)`).Scan(&shards, &valid))
	assert.Equal(t, shardCount, shards)
	assert.Equal(t, shardCount, valid, "the one CHECK, validated, on every shard")

	app := e.conn(t, loginApp)
	res, err := idem.Execute(ctx, app, transfer("upgrade-1", "op-1", 5))
	require.NoError(t, err)
	assert.Equal(t, idem.Applied, res.Outcome)
	_, err = conn.Exec(ctx, "SET ROLE idem_owner")
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `INSERT INTO idem.identity (tenant_id, operation_id, op_class, payload_digest)
		VALUES ('upgrade-1', E'bad\n', 'demo.transfer', sha256('x'))`)
	require.ErrorContains(t, err, "identity_row_valid")
	_, err = conn.Exec(ctx, "RESET ROLE")
	require.NoError(t, err)
}

// TestRunEffectUpgradeOnTheCluster: a cluster migrated before the
// dispatcher took the effect's OID holds idem.run_effect(text, text, text,
// jsonb), created on every node. Migrate drops it everywhere and leaves the
// one that takes the OID on every node, and the executor still runs the
// effect on the node that holds the tenant.
func TestRunEffectUpgradeOnTheCluster(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	conn := e.superuser(t)
	const old = "idem.run_effect(text,text,text,jsonb)"
	for _, sql := range []string{
		`CREATE FUNCTION idem.run_effect(p_op_class text, p_tenant_id text, p_operation_id text, p_payload jsonb)
		 RETURNS jsonb LANGUAGE plpgsql AS $$BEGIN RAISE EXCEPTION 'the old dispatcher ran'; END$$`,
		"ALTER FUNCTION " + old + " OWNER TO idem_owner",
		"REVOKE ALL ON FUNCTION " + old + " FROM PUBLIC",
		"SELECT create_distributed_function('" + old + "')",
	} {
		_, err := conn.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
	onEveryNode := func(sig string) int64 {
		return count(t, conn, `SELECT count(*) FROM run_command_on_workers($$SELECT to_regprocedure('`+sig+`') IS NOT NULL$$)
			WHERE success AND result = 't'`)
	}
	workers := count(t, conn, "SELECT count(*) FROM run_command_on_workers($$SELECT 1$$) WHERE success")
	require.Equal(t, workers, onEveryNode(old), "the old dispatcher is on every worker before the upgrade")

	_, err := migrations.Apply(ctx, conn, migrations.Options{})
	require.NoError(t, err)
	var left bool
	require.NoError(t, conn.QueryRow(ctx, "SELECT to_regprocedure($1) IS NOT NULL", old).Scan(&left))
	assert.False(t, left, "the old dispatcher is gone from the coordinator")
	assert.Zero(t, onEveryNode(old), "the old dispatcher is gone from every worker")
	assert.Equal(t, workers, onEveryNode("idem.run_effect(text,text,text,jsonb,oid)"), "the new one is on every worker")

	app := e.conn(t, loginApp)
	for _, w := range e.c.Workers()[:2] {
		tenant := tenantsOn(t, conn, "runeffect-up", w.Port, 1)[0]
		res, err := idem.Execute(ctx, app, transfer(tenant, "op-1", 3))
		require.NoError(t, err, "a tenant on %s", w.Name)
		assert.Equal(t, idem.Applied, res.Outcome, "a tenant on %s", w.Name)
	}
}
