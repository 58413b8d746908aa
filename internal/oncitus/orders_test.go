package oncitus_test

import (
	"context"
	"fmt"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/demo"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/citustest"
	"github.com/idemctl/idemctl/migrations"
)

// The orders a user can take on a fresh coordinator, each in a database of
// its own on the binary's cluster (the citus extension in it on every node,
// the workers added): what README says (migrate, then demo init), demo init
// between two migrates, and a class a business schema's owner registers
// after migrate (README's Citus example, one statement at a time). In each,
// a service's login then applies a transfer once.

// freshDatabase creates database name on every node of the cluster with the
// citus extension, makes it a Citus cluster of its own (the coordinator in
// the metadata, every worker added) and returns the coordinator's URL for
// it, as the cluster's superuser. The database is left for the cluster's
// removal (Citus 13.2 crashed a worker backend when such a database was
// dropped while the other tests ran).
func freshDatabase(t *testing.T, c *citustest.Cluster, name string) string {
	t.Helper()
	ctx := context.Background()
	nodes := append([]citustest.Node{c.Coordinator}, c.Workers()...)
	urlOf := func(n citustest.Node, db string) string {
		u, err := url.Parse(n.URL)
		require.NoError(t, err)
		u.Path = "/" + db
		return u.String()
	}
	for _, n := range nodes {
		admin, err := pgx.Connect(ctx, urlOf(n, "postgres"))
		require.NoError(t, err)
		// A kept cluster (CITUS_BASEDIR) may hold it from an earlier run.
		_, err = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		if err == nil {
			_, err = admin.Exec(ctx, "CREATE DATABASE "+name)
		}
		admin.Close(ctx)
		require.NoError(t, err, n.Name)
		conn, err := pgx.Connect(ctx, urlOf(n, name))
		require.NoError(t, err)
		_, err = conn.Exec(ctx, "CREATE EXTENSION citus")
		conn.Close(ctx)
		require.NoError(t, err, n.Name)
	}
	coordinator := urlOf(c.Coordinator, name)
	conn, err := pgx.Connect(ctx, coordinator)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "SELECT citus_set_coordinator_host('127.0.0.1', $1)", c.Coordinator.Port)
	require.NoError(t, err)
	for _, w := range c.Workers() {
		_, err = conn.Exec(ctx, "SELECT citus_add_node('127.0.0.1', $1)", w.Port)
		require.NoError(t, err)
	}
	return coordinator
}

// orderEnv is a fresh database with a service's login of its own.
type orderEnv struct {
	t     *testing.T
	ctx   context.Context
	admin *pgx.Conn // the cluster's superuser: what runs idemctl migrate and demo init
	url   string
	app   string // login granted the app role
}

func newOrderEnv(t *testing.T, name string) *orderEnv {
	t.Helper()
	c := citustest.Start(t)
	u := freshDatabase(t, c, name)
	admin, err := pgx.Connect(context.Background(), u)
	require.NoError(t, err)
	t.Cleanup(func() { admin.Close(context.Background()) })
	return &orderEnv{t: t, ctx: context.Background(), admin: admin, url: u, app: name + "_app"}
}

// migrate is idemctl migrate.
func (o *orderEnv) migrate() {
	o.t.Helper()
	_, err := migrations.Apply(o.ctx, o.admin, migrations.Options{ShardCount: 4})
	require.NoError(o.t, err, "migrate")
}

// demoInit is idemctl demo init.
func (o *orderEnv) demoInit() {
	o.t.Helper()
	require.NoError(o.t, demo.Install(o.ctx, o.admin), "demo init")
}

// createApp creates the service's login (once the schema's roles exist).
func (o *orderEnv) createApp() {
	o.t.Helper()
	_, err := o.admin.Exec(o.ctx, fmt.Sprintf("DROP ROLE IF EXISTS %s; CREATE ROLE %s LOGIN IN ROLE %s",
		o.app, o.app, migrations.DefaultRoles().App))
	require.NoError(o.t, err)
}

// applyOnce applies a command as the service, then again: applied, then
// already_applied with the same response.
func (o *orderEnv) applyOnce(cmd idem.Command) {
	o.t.Helper()
	app, err := pgx.Connect(o.ctx, loginURL(o.url, o.app))
	require.NoError(o.t, err)
	defer app.Close(o.ctx)
	first, err := idem.Execute(o.ctx, app, cmd)
	require.NoError(o.t, err)
	require.Equal(o.t, idem.Applied, first.Outcome)
	again, err := idem.Execute(o.ctx, app, cmd)
	require.NoError(o.t, err)
	assert.Equal(o.t, idem.AlreadyApplied, again.Outcome)
	assert.JSONEq(o.t, string(first.Response), string(again.Response))
}

// transfer runs demo.transfer as the service and checks one posting.
func (o *orderEnv) transfer(tenant string) {
	o.t.Helper()
	o.applyOnce(transfer(tenant, "order-1", 25))
	n, err := demo.Postings(o.ctx, o.admin, tenant, "order-1")
	require.NoError(o.t, err)
	assert.Equal(o.t, 1, n)
}

// README's order: migrate, then demo init.
func TestMigrateThenDemoInit(t *testing.T) {
	o := newOrderEnv(t, "order_migrate_demo")
	o.migrate()
	o.demoInit()
	o.createApp()
	o.transfer("acme")
	o.transfer("globex")
	o.demoInit() // again: safe
	o.transfer("initech")
}

// demo init between two migrates: the second migrate keeps the ledger's
// class working.
func TestDemoInitBetweenTwoMigrates(t *testing.T) {
	o := newOrderEnv(t, "order_migrate_demo_migrate")
	o.migrate()
	o.demoInit()
	o.migrate()
	o.createApp()
	o.transfer("acme")
	o.transfer("globex")
}

// A class registered after migrate for a business schema, as README's Citus
// example does it: each statement on its own (autocommit), the business
// schema's owner a LOGIN role that creates its table, its effect and the
// grants, the table distributed by the login that runs migrate, the class
// registered as the idem schema owner.
func TestBusinessOwnerRegistersAClassAfterMigrate(t *testing.T) {
	o := newOrderEnv(t, "order_business_class")
	o.migrate()
	o.createApp()
	roles := migrations.DefaultRoles()
	const owner = "order_payments_owner"
	for _, s := range []string{
		"DROP ROLE IF EXISTS " + owner,
		"CREATE ROLE " + owner + " LOGIN",
		"CREATE SCHEMA payments AUTHORIZATION " + owner,
		"GRANT USAGE ON SCHEMA payments TO " + roles.App,
	} {
		_, err := o.admin.Exec(o.ctx, s)
		require.NoError(t, err, s)
	}
	business, err := pgx.Connect(o.ctx, loginURL(o.url, owner))
	require.NoError(t, err)
	defer business.Close(o.ctx)
	for _, s := range []string{
		`CREATE TABLE payments.charge (tenant_id text NOT NULL, operation_id text NOT NULL, amount bigint NOT NULL,
			PRIMARY KEY (tenant_id, operation_id))`,
		`CREATE FUNCTION payments.charge_effect(p_tenant_id text, p_operation_id text, p_payload jsonb) RETURNS jsonb
			LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, payments, pg_temp
			AS $$
			BEGIN
			    INSERT INTO payments.charge VALUES (p_tenant_id, p_operation_id, (p_payload->>'amount')::bigint);
			    RETURN jsonb_build_object('charged', (p_payload->>'amount')::bigint);
			END $$`,
		"REVOKE ALL ON FUNCTION payments.charge_effect(text,text,jsonb) FROM PUBLIC",
		"GRANT USAGE ON SCHEMA payments TO " + roles.Owner,
		"GRANT EXECUTE ON FUNCTION payments.charge_effect(text,text,jsonb) TO " + roles.Owner,
	} {
		_, err := business.Exec(o.ctx, s)
		require.NoError(t, err, s)
	}
	// Co-locating with idem.identity names it: done by the login that runs
	// idemctl migrate (the business owner has no right on schema idem).
	_, err = o.admin.Exec(o.ctx, `SELECT create_distributed_table('payments.charge', 'tenant_id', colocate_with => 'idem.identity')`)
	require.NoError(t, err)
	require.NoError(t, migrations.AsOwner(o.ctx, o.admin, func(tx pgx.Tx) error {
		_, err := tx.Exec(o.ctx, `SELECT idem.register_class('payments.charge', 'payments.charge_effect(text,text,jsonb)'::regprocedure,
			'forever', 'a card charge', ARRAY['payments.charge']::regclass[])`)
		return err
	}), "register the class as the schema owner")
	o.applyOnce(idem.Command{Identity: idem.Identity{TenantID: "acme", OperationID: "charge-1"}, Class: "payments.charge",
		Payload: []byte(`{"amount":42}`)})
	assert.EqualValues(t, 1, count(t, o.admin, "SELECT count(*) FROM payments.charge WHERE tenant_id = 'acme'"))
}
