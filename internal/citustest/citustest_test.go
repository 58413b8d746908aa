package citustest_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemctl/idemctl/internal/citustest"
)

func TestMain(m *testing.M) { citustest.Main(m) }

// tenants is how many rows the probe table holds, one per tenant.
const tenants = 64

// setup starts the cluster, connects to the coordinator and makes sure the
// probe table exists: distributed by tenant_id over 4 shards.
func setup(t *testing.T) (*citustest.Cluster, *pgx.Conn) {
	t.Helper()
	c := citustest.Start(t)
	t.Logf("cluster in %s (up in %s): coordinator %s, %d workers", c.BaseDir, c.StartTime.Round(time.Millisecond), c.Coordinator.URL, len(c.Workers()))
	conn := connect(t, c.Coordinator.URL)
	ctx := context.Background()
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass('probe') IS NOT NULL").Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if !exists {
		exec(t, conn, "CREATE TABLE probe (tenant_id bigint PRIMARY KEY, note text NOT NULL)")
		exec(t, conn, "SELECT create_distributed_table('probe', 'tenant_id', shard_count => 4)")
		exec(t, conn, "INSERT INTO probe SELECT g, 'tenant ' || g FROM generate_series(1, $1::int) g", tenants)
	}
	return c, conn
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func exec(t *testing.T, conn *pgx.Conn, sql string, args ...any) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func count(t *testing.T, conn *pgx.Conn, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := conn.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// rowsOn counts the probe rows held by shards placed on the node at port.
func rowsOn(t *testing.T, conn *pgx.Conn, port int) int {
	return count(t, conn, `
		SELECT coalesce(sum(r.result::int), 0)
		FROM run_command_on_shards('probe', 'SELECT count(*) FROM %s') r
		JOIN citus_shards s USING (shardid)
		WHERE s.nodeport = $1 AND r.success`, port)
}

func TestClusterPlacesShardsOnEveryWorker(t *testing.T) {
	c, conn := setup(t)
	workers := c.Workers()
	if len(workers) < 2 {
		t.Fatalf("want at least 2 workers, the cluster has %d", len(workers))
	}
	if got := count(t, conn, "SELECT count(*) FROM citus_get_active_worker_nodes()"); got != len(workers) {
		t.Fatalf("active workers: got %d, want %d", got, len(workers))
	}
	for _, w := range workers[:2] {
		shards := count(t, conn, "SELECT count(*) FROM citus_shards WHERE table_name = 'probe'::regclass AND nodeport = $1", w.Port)
		rows := rowsOn(t, conn, w.Port)
		t.Logf("%s (port %d): %d shards, %d rows", w.Name, w.Port, shards, rows)
		if shards == 0 || rows == 0 {
			t.Errorf("%s holds %d probe shards and %d rows; want some of both", w.Name, shards, rows)
		}
	}
	if got := count(t, conn, "SELECT count(*) FROM probe"); got != tenants {
		t.Errorf("probe rows through the coordinator: got %d, want %d", got, tenants)
	}
}

// tenantOn returns a tenant whose shard is placed on the node at port.
func tenantOn(t *testing.T, conn *pgx.Conn, port int) int {
	return count(t, conn, `
		SELECT min(p.tenant_id) FROM probe p
		JOIN citus_shards s ON s.shardid = get_shard_id_for_distribution_column('probe', p.tenant_id)
		WHERE s.nodeport = $1`, port)
}

func TestKilledWorkerComesBackWithItsRows(t *testing.T) {
	c, conn := setup(t)
	workers := c.Workers()
	survivor := tenantOn(t, conn, workers[1].Port)
	if err := c.KillWorker(0); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(context.Background(), "SELECT count(*) FROM probe"); err == nil {
		t.Fatal("a query over every shard succeeded with worker 0 killed")
	} else {
		t.Logf("with %s killed: %v", workers[0].Name, err)
	}
	// A tenant on the other worker still answers.
	if got := count(t, conn, "SELECT count(*) FROM probe WHERE tenant_id = $1", survivor); got != 1 {
		t.Errorf("tenant %d on %s: got %d rows, want 1", survivor, workers[1].Name, got)
	}
	if err := c.RestartWorker(0); err != nil {
		t.Fatal(err)
	}
	var got int
	var err error
	for try := 0; try < 20; try++ { // the coordinator's cached connection died with the worker
		if err = conn.QueryRow(context.Background(), "SELECT count(*) FROM probe").Scan(&got); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil || got != tenants {
		t.Fatalf("after restart: %d rows (want %d), err %v", got, tenants, err)
	}
}

func TestAddedWorkerTakesShardsInARebalance(t *testing.T) {
	c, conn := setup(t)
	before := len(c.Workers())
	added, err := c.AddWorker()
	if err != nil {
		t.Fatal(err)
	}
	if got := count(t, conn, "SELECT count(*) FROM citus_get_active_worker_nodes()"); got != before+1 {
		t.Fatalf("active workers after AddWorker: got %d, want %d", got, before+1)
	}
	began := time.Now()
	exec(t, conn, "SELECT citus_rebalance_start(rebalance_strategy := 'by_shard_count')")
	exec(t, conn, "SELECT citus_rebalance_wait()")
	t.Logf("rebalance onto %s took %s", added.Name, time.Since(began).Round(time.Millisecond))
	if rows := rowsOn(t, conn, added.Port); rows == 0 {
		t.Errorf("%s holds no probe rows after the rebalance", added.Name)
	}
	if got := count(t, conn, "SELECT count(*) FROM probe"); got != tenants {
		t.Errorf("probe rows after the rebalance: got %d, want %d", got, tenants)
	}
}
