package idem_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemctl/idemctl/internal/dbtest"
)

// BenchmarkExecutorServerTime prices what the executor adds to an effect,
// in server time: 5,000 new operations of demo.transfer through pgbench
// (-M simple, one connection, one statement a transaction, as a service
// calls it) as the app login, with track_functions = all, then the time per
// call from pg_stat_user_functions: own_us is idem.execute's total without
// the effect's (the executor's own cost, the per-call effect check
// included); the rest are the self times of each function. b.N is ignored.
//
//	go test ./idem -run '^$' -bench BenchmarkExecutorServerTime -benchtime 1x -count 3
func BenchmarkExecutorServerTime(b *testing.B) {
	const calls = 5000
	ctx := context.Background()
	dsn := dbtest.NewDatabase(b)
	dbtest.Admin(b, dsn, "ALTER DATABASE "+dbName(dsn)+" SET track_functions = 'all'")
	admin := dbtest.PoolAs(b, dsn, dbtest.Superuser, 1)
	for i := 0; i < b.N; i++ {
		dbtest.Admin(b, dsn, "SELECT pg_stat_reset()")
		dbtest.PgbenchCount(b, dbtest.As(dsn, dbtest.App), pgbenchApplied, 1, calls)
		// pgbench's backend flushes its function statistics when it exits.
		var got bool
		for deadline := time.Now().Add(10 * time.Second); !got && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if _, err := admin.Exec(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
				b.Fatal(err)
			}
			rows, err := admin.Query(ctx, `SELECT f.schemaname || '.' || f.funcname, f.calls, f.self_time * 1000 / f.calls,
				       CASE WHEN f.funcname = 'execute' THEN (f.total_time - e.total_time) * 1000 / f.calls END
				FROM pg_stat_user_functions f, pg_stat_user_functions e
				WHERE e.schemaname = 'demo' AND e.funcname = 'transfer_effect' AND f.calls > 0`)
			if err != nil {
				b.Fatal(err)
			}
			metrics := map[string]float64{}
			for rows.Next() {
				var name string
				var n int64
				var self float64
				var own *float64
				if err := rows.Scan(&name, &n, &self, &own); err != nil {
					b.Fatal(err)
				}
				if name == "idem.execute" && n >= calls {
					got = true
				}
				metrics[name+"_self_us"] = self
				if own != nil {
					metrics["own_us"] = *own
				}
			}
			if err := rows.Err(); err != nil {
				b.Fatal(err)
			}
			if got {
				for k, v := range metrics {
					b.ReportMetric(v, k)
				}
			}
		}
		if !got {
			b.Fatalf("no function statistics for %d calls", calls)
		}
	}
}
