package oncitus_test

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/demo"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/citustest"
	"github.com/idemctl/idemctl/internal/db"
	"github.com/idemctl/idemctl/migrations"
)

func TestMain(m *testing.M) { citustest.Main(m) }

// Logins the tests connect as, created on the coordinator (Citus creates
// them on the workers), each a member of one group role of the schema.
const (
	loginApp      = "citus_t_app"
	loginOperator = "citus_t_alice"
	// loginOperator2 is a second person (four-eyes).
	loginOperator2 = "citus_t_bob"
	loginAuditor   = "citus_t_auditor"
)

// Size of the inbox that exists before it is distributed.
const (
	grownIdentities = 100_000
	grownTenants    = 40
	grownConflicts  = 12
	grownRejected   = 4
	// shardCount keeps the cluster small on a 2-core machine: 8 shards per
	// table, 4 on each worker.
	shardCount = 8
)

// env is what every test of the binary shares.
type env struct {
	c     *citustest.Cluster
	admin string // the coordinator, as the cluster's superuser
	grown grown
}

// grown is what distributing the inbox that already held data did.
type grown struct {
	before, after inventory
	report        migrations.Report
	took          time.Duration
	audit         []string // the audit chain's hashes before
}

// inventory counts what an inbox holds.
type inventory struct {
	Identities, Bodies, Quarantine, Rejected, Audit, Postings int64
	QuarantineIDs                                             string
}

var shared struct {
	once sync.Once
	env  *env
	err  error
}

// setup returns the binary's cluster with the schema distributed, making it
// on first use. It skips the test when Citus is not available.
func setup(t testing.TB) *env {
	t.Helper()
	c := citustest.Start(t)
	shared.once.Do(func() {
		shared.env, shared.err = prepare(c)
	})
	if shared.err != nil {
		t.Fatalf("prepare the cluster: %v", shared.err)
	}
	return shared.env
}

func prepare(c *citustest.Cluster) (*env, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	e := &env{c: c, admin: c.Coordinator.URL}
	conn, err := pgx.Connect(ctx, e.admin)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	// A single-node inbox first: the schema with its tables on the coordinator.
	if _, err := migrations.Apply(ctx, conn, migrations.Options{NoDistribute: true}); err != nil {
		return nil, fmt.Errorf("migrate without distributing: %w", err)
	}
	if err := createLogins(ctx, conn); err != nil {
		return nil, err
	}
	if err := demo.Install(ctx, conn); err != nil {
		return nil, fmt.Errorf("demo init before distributing: %w", err)
	}
	if err := e.grow(ctx, conn); err != nil {
		return nil, fmt.Errorf("fill the inbox: %w", err)
	}
	if e.grown.before, err = take(ctx, conn); err != nil {
		return nil, err
	}
	if e.grown.audit, err = auditHashes(ctx, conn); err != nil {
		return nil, err
	}
	began := time.Now()
	e.grown.report, err = migrations.Apply(ctx, conn, migrations.Options{ShardCount: shardCount})
	e.grown.took = time.Since(began)
	if err != nil {
		return nil, fmt.Errorf("migrate on the coordinator: %w", err)
	}
	if e.grown.after, err = take(ctx, conn); err != nil {
		return nil, err
	}
	if err := demo.Install(ctx, conn); err != nil {
		return nil, fmt.Errorf("demo init after distributing: %w", err)
	}
	return e, nil
}

func createLogins(ctx context.Context, conn *pgx.Conn) error {
	r := migrations.DefaultRoles()
	for login, group := range map[string]string{loginApp: r.App, loginOperator: r.Operator, loginOperator2: r.Operator, loginAuditor: r.Auditor} {
		if _, err := conn.Exec(ctx, "CREATE ROLE "+login+" LOGIN IN ROLE "+group); err != nil {
			return fmt.Errorf("create login %s: %w", login, err)
		}
	}
	return migrations.AsOwner(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT idem.person_add('alice', $1)", loginOperator); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "SELECT idem.person_add('bob', $1)", loginOperator2)
		return err
	})
}

// grow fills the single-node inbox as a service and an operator would have
// over time: history backdated over three days, real transfers, conflicts,
// some of them rejected (audit rows).
func (e *env) grow(ctx context.Context, conn *pgx.Conn) error {
	err := migrations.AsOwner(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT idem.inbox_body_ensure((now() - interval '4 days')::date, now()::date)"); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, historySQL, grownIdentities, grownTenants)
		return err
	})
	if err != nil {
		return err
	}
	app, err := db.Connect(ctx, loginURL(e.admin, loginApp), db.Options{})
	if err != nil {
		return err
	}
	defer app.Close(context.Background())
	for i := 0; i < grownConflicts; i++ {
		tenant := fmt.Sprintf("g%02d", i%grownTenants)
		if _, err := idem.Execute(ctx, app, transfer(tenant, fmt.Sprintf("live-%d", i), 10+i)); err != nil {
			return err
		}
		res, err := idem.Execute(ctx, app, transfer(tenant, fmt.Sprintf("live-%d", i), 999))
		if err != nil {
			return err
		}
		if res.Outcome != idem.Conflict {
			return fmt.Errorf("a conflict of %s was %s", tenant, res.Outcome)
		}
	}
	op, err := db.Connect(ctx, loginURL(e.admin, loginOperator), db.Options{})
	if err != nil {
		return err
	}
	defer op.Close(context.Background())
	_, err = op.Exec(ctx, `SELECT idem.quarantine_reject(id, 'on-call', 'rejected before the move')
		FROM (SELECT id FROM idem.quarantine ORDER BY id LIMIT $1) q`, grownRejected)
	return err
}

// historySQL writes $1 applied demo.transfer identities hist-K over $2
// tenants gNN (K mod $2), backdated over the last three days, with their
// canonical payload {"amount":K,"currency":"EUR","from":"a","to":"b"} and the
// response {"ok":true}: history no API would backdate (as the schema owner).
const historySQL = `
	WITH rows AS (
	    SELECT 'g' || lpad((g % $2)::text, 2, '0') AS tenant, 'hist-' || g AS op,
	           '{"amount":' || g || ',"currency":"EUR","from":"a","to":"b"}' AS payload,
	           now() - interval '3 days' + g * interval '2 seconds' AS at
	    FROM generate_series(1, $1::int) g
	), ident AS (
	    INSERT INTO idem.identity (tenant_id, operation_id, op_class, payload_digest, created_at)
	    SELECT tenant, op, 'demo.transfer', sha256(convert_to(payload, 'UTF8')), at FROM rows
	    RETURNING 1
	)
	INSERT INTO idem.inbox_body (tenant_id, operation_id, created_at, op_class, payload, response)
	SELECT tenant, op, at, 'demo.transfer', payload, '{"ok":true}' FROM rows`

func take(ctx context.Context, conn *pgx.Conn) (inventory, error) {
	var n inventory
	err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM idem.identity), (SELECT count(*) FROM idem.inbox_body),
		(SELECT count(*) FROM idem.quarantine), (SELECT count(*) FROM idem.quarantine WHERE status = 'rejected'),
		(SELECT count(*) FROM idem.audit), (SELECT count(*) FROM demo.posting),
		(SELECT string_agg(id::text || ':' || status || ':' || occurrences, ',' ORDER BY id) FROM idem.quarantine)`).
		Scan(&n.Identities, &n.Bodies, &n.Quarantine, &n.Rejected, &n.Audit, &n.Postings, &n.QuarantineIDs)
	return n, err
}

func auditHashes(ctx context.Context, conn *pgx.Conn) ([]string, error) {
	rows, err := conn.Query(ctx, "SELECT hash FROM idem.audit ORDER BY id")
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// loginURL is the coordinator's URL (or a worker's) for another login; the
// cluster trusts local connections.
func loginURL(base, login string) string {
	u, err := url.Parse(base)
	if err != nil {
		panic(err)
	}
	u.User = url.User(login)
	return u.String()
}

func (e *env) pool(t testing.TB, login string, maxConns int32) *pgxpool.Pool {
	t.Helper()
	p, err := db.Open(context.Background(), loginURL(e.admin, login), db.Options{MaxConns: maxConns})
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
}

func (e *env) conn(t *testing.T, login string) *pgx.Conn {
	t.Helper()
	c, err := db.Connect(context.Background(), loginURL(e.admin, login), db.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// superuser is a connection to the coordinator as the cluster's superuser.
func (e *env) superuser(t testing.TB) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), e.admin)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func count(t *testing.T, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	require.NoError(t, q.QueryRow(context.Background(), sql, args...).Scan(&n), sql)
	return n
}

func transfer(tenant, op string, amount int) idem.Command {
	return idem.Command{
		Identity: idem.Identity{TenantID: tenant, OperationID: op},
		Class:    demo.Class,
		Payload:  []byte(fmt.Sprintf(`{"from":"alice","to":"bob","amount":%d,"currency":"EUR"}`, amount)),
	}
}

// workerPort returns the port of the worker holding tenant's shard of idem.identity.
func workerPort(t *testing.T, conn *pgx.Conn, tenant string) int {
	t.Helper()
	var port int
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT s.nodeport FROM citus_shards s
		WHERE s.shardid = get_shard_id_for_distribution_column('idem.identity', $1::text)`, tenant).Scan(&port))
	return port
}

// tenantsOn returns n tenants named prefix-K whose shards are on the worker at port.
func tenantsOn(t *testing.T, conn *pgx.Conn, prefix string, port, n int) []string {
	t.Helper()
	var out []string
	for k := 0; len(out) < n; k++ {
		require.Less(t, k, 1000, "no tenant on port %d", port)
		tenant := fmt.Sprintf("%s-%d", prefix, k)
		if workerPort(t, conn, tenant) == port {
			out = append(out, tenant)
		}
	}
	return out
}

// spread returns n tenants on each of the first two workers.
func (e *env) spread(t *testing.T, conn *pgx.Conn, prefix string, n int) []string {
	t.Helper()
	w := e.c.Workers()
	return append(tenantsOn(t, conn, prefix, w[0].Port, n), tenantsOn(t, conn, prefix, w[1].Port, n)...)
}
