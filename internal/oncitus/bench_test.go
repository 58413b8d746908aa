package oncitus_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/db"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/recovery"
)

// The Citus benchmarks measure, in one run, the same work on plain
// PostgreSQL (a database of the test server, TEST_DATABASE_URL) and through
// the local cluster's coordinator. Both share the machine's 2 cores: the
// cluster's three servers and the plain one compete for the same CPUs, so
// the ratio is the cost of delegation on one machine, not a cluster's
// throughput (BENCHMARKS.md says how that grows with workers). Run with
//
//	go test ./internal/oncitus -run '^$' -bench . -benchtime 3s

// BenchmarkExecuteThroughCoordinator: idem.Execute of demo.transfer, a new
// identity per op, tenants spread over 64 (so over both workers), on 1 and 8
// dedicated connections: plain PostgreSQL, then the coordinator (each call
// delegated to the worker of its tenant).
func BenchmarkExecuteThroughCoordinator(b *testing.B) {
	e := setup(b)
	_, dsn := dbtest.NewPool(b, 1)
	plain := noFlushPool(b, dbtest.As(dsn, dbtest.App), 9)
	citus := noFlushPool(b, loginURL(e.admin, loginApp), 9)
	ctx := context.Background()
	var seq atomic.Int64
	for _, conns := range []int{1, 8} {
		for _, target := range []struct {
			name string
			pool *pgxpool.Pool
		}{{"plain", plain}, {"citus", citus}} {
			b.Run(fmt.Sprintf("%s/conns=%d", target.name, conns), func(b *testing.B) {
				dbtest.Parallel(b, target.pool, conns, func(c *pgxpool.Conn) error {
					n := seq.Add(1)
					res, err := idem.Execute(ctx, c, transfer(fmt.Sprintf("bench-%d", n%64), fmt.Sprintf("bench-op-%d", n), 1+int(n%1000)))
					if err == nil && res.Outcome != idem.Applied {
						err = fmt.Errorf("outcome %s", res.Outcome)
					}
					return err
				})
			})
		}
	}
}

// dryRunKeys is how many identities one dry run looks up.
const dryRunKeys = 20_000

// BenchmarkResolveDryRunThroughCoordinator: one op = resolve's dry run
// (batched lookups, 4 connections) over 20,000 applied identities spread
// over 40 tenants: plain PostgreSQL, then the coordinator (each batch is one
// statement over every shard).
func BenchmarkResolveDryRunThroughCoordinator(b *testing.B) {
	e := setup(b)
	ctx := context.Background()
	dsn := dbtest.NewDatabase(b)
	if err := dbtest.Owner(dsn, "SELECT idem.inbox_body_ensure((now() - interval '4 days')::date, now()::date)"); err != nil {
		b.Fatal(err)
	}
	if err := dbtest.Owner(dsn, historySQL, dryRunKeys, grownTenants); err != nil {
		b.Fatal(err)
	}
	plain := dbtest.PoolAs(b, dsn, dbtest.Operator, 8)
	citus := e.pool(b, loginOperator, 8)
	var input bytes.Buffer
	for k := 1; k <= dryRunKeys; k++ {
		line, _ := json.Marshal(map[string]any{"tenant": fmt.Sprintf("g%02d", k%grownTenants), "operation_id": fmt.Sprintf("hist-%d", k),
			"class": "demo.transfer", "payload": map[string]any{"amount": k, "currency": "EUR", "from": "a", "to": "b"}})
		input.Write(line)
		input.WriteByte('\n')
	}
	for _, target := range []struct {
		name string
		pool *pgxpool.Pool
	}{{"plain", plain}, {"citus", citus}} {
		b.Run(target.name, func(b *testing.B) {
			r := &recovery.Resolver{Pool: target.pool, Config: recovery.Config{DryRun: true, Operator: "bench", Concurrency: 4}}
			run := func() {
				sum, err := r.Run(ctx, recovery.NDJSON(bytes.NewReader(input.Bytes()), idem.DefaultMaxPayloadBytes+recovery.LineSlack),
					func(recovery.Result) error { return nil })
				if err != nil {
					b.Fatal(err)
				}
				if sum.Counts[recovery.AlreadyApplied] != dryRunKeys {
					b.Fatalf("counts %v, want %d already applied", sum.Counts, dryRunKeys)
				}
			}
			run() // warm the caches
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				run()
			}
			b.ReportMetric(float64(dryRunKeys)*float64(b.N)/b.Elapsed().Seconds(), "keys/s")
		})
	}
}

// noFlushPool opens a pool whose sessions commit without waiting for the WAL
// flush (synchronous_commit = off): the cluster's nodes run with fsync off
// (scripts/citus-cluster.sh), so the plain server must not pay a flush per
// commit that the cluster does not, or the ratio measures disks.
func noFlushPool(b *testing.B, url string, maxConns int32) *pgxpool.Pool {
	b.Helper()
	cfg, err := db.Config(url, db.Options{MaxConns: maxConns})
	if err != nil {
		b.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return pool
}
