package horizon_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/internal/db"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/migrations"
)

// benchDays is how many days of inbox the purge benchmark holds; the cutoff
// is in the middle, so half the rows go.
const benchDays = 50

// benchRows is the inbox size: HORIZON_BENCH_ROWS, default 1,000,000.
func benchRows(b *testing.B) int {
	if s := os.Getenv("HORIZON_BENCH_ROWS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1000 {
			b.Fatalf("HORIZON_BENCH_ROWS=%q: want a number >= 1000", s)
		}
		return n
	}
	return 1_000_000
}

// The benchmark's rows: a realistic payment (about 480 bytes of JSON), a
// saved response and transport metadata, in 64 tenants, random operation ids,
// evenly spread over benchDays days before $2 (the load's now), one class.
// Both shapes get identical rows.
const benchRowSQL = `
SELECT 'tenant-' || (g % 64) AS tenant_id,
       'op-' || md5(g::text) AS operation_id,
       'bench.projection' AS op_class,
       sha256(convert_to('p' || g, 'UTF8')) AS digest,
       $2::timestamptz - make_interval(days => ` + "50" + `) + (g::float8 / $1) * interval '50 days' AS created_at,
       jsonb_build_object('amount', g % 100000, 'currency', 'EUR', 'from', 'acct-' || (g % 1000),
           'to', 'acct-' || (1000 + g % 1000), 'reference', 'invoice-2026-' || g,
           'description', 'Monthly subscription renewal, plan premium annual, customer ' || (g % 5000),
           'metadata', jsonb_build_object('channel', 'api', 'ip', '203.0.113.' || (g % 255),
               'user_agent', 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36',
               'customer_id', 'cus_' || md5((g % 5000)::text), 'order_id', 'ord_' || md5(g::text))) AS payload,
       jsonb_build_object('posting_id', md5('posting' || g)::uuid, 'status', 'posted',
           'from_balance', -g, 'to_balance', g) AS response,
       jsonb_build_object('topic', 'payments', 'partition', g % 12, 'offset', g) AS transport
FROM generate_series(1, $1::int) AS g`

// benchDatabases builds (once, kept for later runs) two databases with the
// same rows: v1, the former single inbox table, and v4, this migration's
// identity + daily-partitioned body. It returns their names and the load's now.
func benchDatabases(b *testing.B, rows int) (v1, v4 string, now time.Time) {
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, dbtest.AdminURL())
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close(ctx)
	base := fmt.Sprintf("idemctl_hzbench_%s_%d", migrations.Digest(), rows)
	v1, v4 = base+"_v1", base+"_v4"
	var exists bool
	if err := admin.QueryRow(ctx, "SELECT count(*) = 2 FROM pg_database WHERE datname IN ($1, $2)", v1, v4).Scan(&exists); err != nil {
		b.Fatal(err)
	}
	if !exists {
		now = time.Now().UTC().Truncate(time.Second)
		for _, name := range []string{v1, v4} {
			for _, old := range []string{name, name + "_building"} { // a build that was interrupted leaves the latter
				if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{old}.Sanitize()+" WITH (FORCE)"); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name + "_building"}.Sanitize()); err != nil {
				b.Fatal(err)
			}
		}
		fmt.Fprintf(os.Stderr, "building purge benchmark databases (%d rows each, once)\n", rows)
		buildV1(b, dbtest.URLFor(v1+"_building"), rows, now)
		buildV4(b, dbtest.URLFor(v4+"_building"), rows, now)
		for _, name := range []string{v1, v4} {
			if _, err := admin.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{name + "_building"}.Sanitize()+" RENAME TO "+pgx.Identifier{name}.Sanitize()); err != nil {
				b.Fatal(err)
			}
		}
	}
	conn, err := pgx.Connect(ctx, dbtest.URLFor(v1))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, "SELECT load_now FROM public.bench_meta").Scan(&now); err != nil {
		b.Fatal(err)
	}
	return v1, v4, now
}

func benchExec(b *testing.B, conn *pgx.Conn, sql string, args ...any) {
	b.Helper()
	if _, err := conn.Exec(context.Background(), sql, args...); err != nil {
		b.Fatalf("%s: %v", sql, err)
	}
}

func buildV1(b *testing.B, url string, rows int, now time.Time) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	// The inbox as 001_core.sql made it, keys added after the load.
	benchExec(b, conn, `CREATE TABLE public.inbox_v1 (
		tenant_id text NOT NULL, operation_id text NOT NULL, op_class text NOT NULL, payload_hash text NOT NULL,
		payload jsonb NOT NULL, response jsonb, created_at timestamptz NOT NULL DEFAULT now(), transport jsonb)`)
	benchExec(b, conn, `INSERT INTO public.inbox_v1
		SELECT tenant_id, operation_id, op_class, 'jcs-sha256:' || encode(digest, 'hex'), payload, response, created_at, transport
		FROM (`+benchRowSQL+`) r`, rows, now)
	benchExec(b, conn, "ALTER TABLE public.inbox_v1 ADD PRIMARY KEY (tenant_id, operation_id)")
	benchExec(b, conn, "CREATE TABLE public.bench_meta AS SELECT $1::timestamptz AS load_now", now)
	benchExec(b, conn, "VACUUM ANALYZE public.inbox_v1")
}

func buildV4(b *testing.B, url string, rows int, now time.Time) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := migrations.Apply(ctx, conn, migrations.Options{}); err != nil {
		b.Fatal(err)
	}
	benchExec(b, conn, "SELECT idem.register_class('bench.projection', NULL, 'horizon')")
	benchExec(b, conn, "SELECT idem.inbox_body_ensure(($1::timestamptz AT TIME ZONE 'UTC')::date - $2::int - 1, ($1::timestamptz AT TIME ZONE 'UTC')::date + 7)", now, benchDays)
	// Keys dropped for the load and added back after: a bulk load, not the
	// purge, is what would be slow otherwise.
	benchExec(b, conn, "ALTER TABLE idem.identity DROP CONSTRAINT identity_pkey")
	benchExec(b, conn, "ALTER TABLE idem.inbox_body DROP CONSTRAINT inbox_body_pkey")
	benchExec(b, conn, `INSERT INTO idem.identity (tenant_id, operation_id, op_class, payload_digest, created_at)
		SELECT tenant_id, operation_id, op_class, digest, created_at FROM (`+benchRowSQL+`) r`, rows, now)
	benchExec(b, conn, `INSERT INTO idem.inbox_body (tenant_id, operation_id, created_at, op_class, payload, response, transport)
		SELECT tenant_id, operation_id, created_at, op_class, payload, response, transport FROM (`+benchRowSQL+`) r`, rows, now)
	benchExec(b, conn, "ALTER TABLE idem.identity ADD PRIMARY KEY (tenant_id, operation_id)")
	benchExec(b, conn, "ALTER TABLE idem.inbox_body ADD PRIMARY KEY (tenant_id, operation_id, created_at)")
	benchExec(b, conn, "VACUUM ANALYZE")
}

// copyDB clones a benchmark database for one measurement, dropped at the end.
func copyDB(b *testing.B, from string) string {
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, dbtest.AdminURL())
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close(ctx)
	name := from + "_run"
	benchExec(b, admin, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	benchExec(b, admin, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+pgx.Identifier{from}.Sanitize())
	b.Cleanup(func() {
		admin, err := pgx.Connect(context.Background(), dbtest.AdminURL())
		if err == nil {
			_, _ = admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
			admin.Close(context.Background())
		}
	})
	return dbtest.URLFor(name)
}

// walMark checkpoints (so that every measurement starts with the same
// full-page-write state) and returns the WAL position.
func walMark(b *testing.B, conn *pgx.Conn) string {
	benchExec(b, conn, "CHECKPOINT")
	return dbtest.WALPosition(b, conn)
}

// BenchmarkPurge purges half of an inbox (rows older than 25 of its 50 days)
// three ways, each in its own copy of the same data:
//
//	bare_delete    one DELETE ... WHERE created_at < T on the former single
//	               inbox table (unsafe: no proof, no tombstones, one lock set
//	               held for the whole run): the baseline;
//	ctid_batches   the same table, DELETE by ctid ranges of ~5,000 rows per
//	               transaction (for orientation: the batched design without
//	               partitions);
//	horizon_purge  horizon.Purge of an approved plan on this migration's
//	               storage: re-probe, whole days swapped out, the straddling
//	               day by ctid batches, tombstones left in idem.identity.
//
// Reported: rows/s and the ratio to bare_delete (target >= 1.0), p99 and max
// transaction time (target p99 <= 100 ms), WAL bytes (target <= bare), and
// bytes per tombstone against bytes of the inbox row it replaces (target <=
// 25%). Run with -benchtime 1x; HORIZON_BENCH_ROWS sets the size (default
// 1,000,000; scripts/bench-horizon.sh uses 5,000,000).
func BenchmarkPurge(b *testing.B) {
	rows := benchRows(b)
	v1, v4, now := benchDatabases(b, rows)
	cutoff := now.Add(-benchDays / 2 * 24 * time.Hour)
	ctx := context.Background()
	var bareRate, bareWAL float64

	b.Run("bare_delete", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			conn, err := pgx.Connect(ctx, copyDB(b, v1))
			if err != nil {
				b.Fatal(err)
			}
			lsn := walMark(b, conn)
			b.ResetTimer()
			start := time.Now()
			tag, err := conn.Exec(ctx, "DELETE FROM public.inbox_v1 WHERE created_at < $1", cutoff)
			if err != nil {
				b.Fatal(err)
			}
			el := time.Since(start)
			b.StopTimer()
			bareRate = float64(tag.RowsAffected()) / el.Seconds()
			bareWAL = dbtest.WALSince(b, conn, lsn)
			b.ReportMetric(float64(tag.RowsAffected()), "rows")
			b.ReportMetric(bareRate, "rows/s")
			b.ReportMetric(float64(el.Milliseconds()), "lock_hold_ms")
			b.ReportMetric(bareWAL/(1<<20), "WAL_MiB")
			conn.Close(ctx)
		}
	})

	b.Run("ctid_batches", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			conn, err := pgx.Connect(ctx, copyDB(b, v1))
			if err != nil {
				b.Fatal(err)
			}
			var blocks int64
			var tuples float64
			if err := conn.QueryRow(ctx, `SELECT pg_relation_size('public.inbox_v1') / 8192, reltuples FROM pg_class WHERE oid = 'public.inbox_v1'::regclass`).Scan(&blocks, &tuples); err != nil {
				b.Fatal(err)
			}
			step := max(int64(5000/(tuples/float64(blocks))), 1)
			lsn := walMark(b, conn)
			b.ResetTimer()
			start := time.Now()
			var total int64
			var txs []time.Duration
			for from := int64(0); from < blocks; from += step {
				t0 := time.Now()
				tag, err := conn.Exec(ctx, `DELETE FROM public.inbox_v1 WHERE ctid >= format('(%s,0)', $1::bigint)::tid
					AND ctid < format('(%s,0)', $2::bigint)::tid AND created_at < $3`, from, from+step, cutoff)
				if err != nil {
					b.Fatal(err)
				}
				txs = append(txs, time.Since(t0))
				total += tag.RowsAffected()
			}
			el := time.Since(start)
			b.StopTimer()
			wal := dbtest.WALSince(b, conn, lsn)
			b.ReportMetric(float64(total)/el.Seconds(), "rows/s")
			b.ReportMetric(float64(total)/el.Seconds()/bareRate, "x_bare")
			b.ReportMetric(float64(p99(txs).Microseconds())/1000, "p99_tx_ms")
			b.ReportMetric(wal/(1<<20), "WAL_MiB")
			conn.Close(ctx)
		}
	})

	b.Run("horizon_purge", func(b *testing.B) {
		// The purge runs as operators do: alice plans and purges, bob
		// approves. dbtest creates their logins with its template.
		dbtest.NewDatabase(b)
		for i := 0; i < b.N; i++ {
			url := copyDB(b, v4)
			if err := dbtest.Owner(url, "SELECT idem.person_add($1, $2), idem.person_add($3, $4)",
				dbtest.PersonOperator, string(dbtest.Operator), dbtest.PersonOperator2, string(dbtest.Operator2)); err != nil {
				b.Fatal(err)
			}
			pool, err := db.Open(ctx, dbtest.As(url, dbtest.Operator), db.Options{MaxConns: 4, StatementTimeout: 10 * time.Minute})
			if err != nil {
				b.Fatal(err)
			}
			approver, err := db.Open(ctx, dbtest.As(url, dbtest.Operator2), db.Options{MaxConns: 1})
			if err != nil {
				b.Fatal(err)
			}
			p, err := horizon.MakePlan(ctx, pool, horizon.PlanOptions{Class: "bench.projection", Before: cutoff, Operator: "alice", AcceptUnbounded: true})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := horizon.Approve(ctx, approver, p.ID, "bob"); err != nil {
				b.Fatal(err)
			}
			approver.Close()
			conn, err := pgx.Connect(ctx, url)
			if err != nil {
				b.Fatal(err)
			}
			identityBytes, replacedBytes := tombstoneSizes(b, conn, url, v1)
			lsn := walMark(b, conn)
			b.ResetTimer()
			start := time.Now()
			res, err := horizon.Purge(ctx, pool, p.ID, horizon.PurgeOptions{Operator: "alice"})
			if err != nil {
				b.Fatal(err)
			}
			el := time.Since(start)
			b.StopTimer()
			if res.Plan.Purged != p.Candidates {
				b.Fatalf("purged %d of %d candidates", res.Plan.Purged, p.Candidates)
			}
			wal := dbtest.WALSince(b, conn, lsn)
			swapMS := maxSwapMS(b, conn, p.ID)
			ms := make([]string, len(res.TxDurations))
			for i, d := range res.TxDurations {
				ms[i] = strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 1, 64)
			}
			b.Logf("purge %s rows in %s: %d swaps, %d batches; transactions (ms): %s", strconv.FormatInt(res.Purged, 10), el,
				res.Swaps, res.Batches, strings.Join(ms, " "))
			rate := float64(res.Purged) / el.Seconds()
			b.ReportMetric(float64(res.Purged), "rows")
			b.ReportMetric(rate, "rows/s")
			b.ReportMetric(rate/bareRate, "x_bare")
			b.ReportMetric(float64(res.LockHoldP99().Microseconds())/1000, "p99_tx_ms")
			b.ReportMetric(float64(maxDur(res.TxDurations).Microseconds())/1000, "max_tx_ms")
			b.ReportMetric(swapMS, "max_swap_tx_ms")
			b.ReportMetric(float64(res.Swaps), "swaps")
			b.ReportMetric(float64(res.Batches), "batches")
			b.ReportMetric(wal/(1<<20), "WAL_MiB")
			b.ReportMetric(wal/bareWAL, "x_bare_WAL")
			b.ReportMetric(identityBytes, "tombstone_B")
			b.ReportMetric(replacedBytes, "replaced_row_B")
			b.ReportMetric(identityBytes/replacedBytes*100, "tombstone_%")
			var tombs int64
			if err := conn.QueryRow(ctx, "SELECT count(*) FROM idem.identity i WHERE NOT EXISTS (SELECT 1 FROM idem.inbox_body b WHERE b.tenant_id = i.tenant_id AND b.operation_id = i.operation_id AND b.created_at = i.created_at)").Scan(&tombs); err != nil {
				b.Fatal(err)
			}
			if tombs != res.Purged {
				b.Fatalf("%d tombstones for %d purged rows", tombs, res.Purged)
			}
			conn.Close(ctx)
			pool.Close()
		}
	})
}

// tombstoneSizes returns bytes per identity row (a tombstone is that row,
// heap and primary key, pg_total_relation_size) and bytes per row of the
// former single inbox table (heap, TOAST and primary key) that it replaces.
func tombstoneSizes(b *testing.B, conn *pgx.Conn, url, v1 string) (float64, float64) {
	ctx := context.Background()
	var identity, n float64
	if err := conn.QueryRow(ctx, "SELECT pg_total_relation_size('idem.identity'), (SELECT count(*) FROM idem.identity)").Scan(&identity, &n); err != nil {
		b.Fatal(err)
	}
	c1, err := pgx.Connect(ctx, dbtest.URLFor(v1))
	if err != nil {
		b.Fatal(err)
	}
	defer c1.Close(ctx)
	var inbox, n1 float64
	if err := c1.QueryRow(ctx, "SELECT pg_total_relation_size('public.inbox_v1'), (SELECT count(*) FROM public.inbox_v1)").Scan(&inbox, &n1); err != nil {
		b.Fatal(err)
	}
	return identity / n, inbox / n1
}

// maxSwapMS is the longest swap transaction, from the batch log (database
// clock): the parent's exclusive lock is held for its last few statements only.
func maxSwapMS(b *testing.B, conn *pgx.Conn, plan int64) float64 {
	var ms *float64
	if err := conn.QueryRow(context.Background(), `SELECT max(extract(epoch FROM finished_at - started_at) * 1000)
		FROM idem.horizon_batch WHERE plan_id = $1 AND method = 'swap'`, plan).Scan(&ms); err != nil {
		b.Fatal(err)
	}
	if ms == nil {
		return 0
	}
	return *ms
}

func p99(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[(len(s)*99+99)/100-1]
}

func maxDur(d []time.Duration) time.Duration {
	var m time.Duration
	for _, x := range d {
		m = max(m, x)
	}
	return m
}
