package quarantine_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemctl/idemctl/internal/db"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/quarantine"
)

// triageFill inserts n records with the variety triage filters on: 1,000
// tenants, 20 classes, four sources, differing fields /amount (45%),
// /currency (30%), /amount and /to (20%), /memo (4%), /items/0/qty (1%) and a
// rare /x/rare (0.01%), activity over 90 days; 2% open, ~80% rejected, ~18%
// accepted. Payloads and hashes agree (the table's CHECKs recompute them).
const triageFill = `
INSERT INTO idem.quarantine (
    tenant_id, operation_id, incoming_hash, op_class, stored_hash, stored_payload, stored_response,
    incoming_class, incoming_payload, incoming_transport, diff, holds_on, detected_app, detected_user,
    first_seen, last_seen, occurrences,
    status, decided_at, decided_by, decided_db_user, decision_reason, new_operation_id, new_outcome, decision_audit_id)
SELECT 'tenant-' || (g % 1000), 'op-' || g, 'jcs-sha256:' || encode(sha256(convert_to(ip, 'UTF8')), 'hex'), cls,
       'jcs-sha256:' || encode(sha256(convert_to(sp, 'UTF8')), 'hex'), sp, '{"ok":true}', cls, ip,
       jsonb_build_object('source', (ARRAY['mobile', 'web', 'kafka', 'webhook'])[1 + g % 4]),
       (SELECT jsonb_agg(jsonb_build_object('path', p, 'change', 'changed', 'stored', 1, 'incoming', 2)) FROM unnest(paths) p),
       'identity', 'bench', 'postgres',
       ts, ts + (g % 5) * interval '1 minute', 1 + g % 3,
       st,
       CASE WHEN st <> 'open' THEN ts + interval '1 hour' END,
       CASE WHEN st <> 'open' THEN 'alice' END,
       CASE WHEN st <> 'open' THEN 'postgres' END,
       CASE WHEN st <> 'open' THEN 'bench' END,
       CASE WHEN st = 'accepted' THEN 'op-' || g || '-rev' END,
       CASE WHEN st = 'accepted' THEN 'applied' END,
       CASE WHEN st <> 'open' THEN g END
FROM generate_series(1, $1::bigint) AS g,
     LATERAL (SELECT now() - interval '90 days' * (g::float8 / $1) AS ts,
                     'class-' || (g % 20) AS cls,
                     format('{"amount":%s}', g) AS sp,
                     format('{"amount":%s,"n":1}', g) AS ip,
                     CASE WHEN g % 10000 = 0 THEN ARRAY['/x/rare']
                          WHEN g % 100 < 45 THEN ARRAY['/amount']
                          WHEN g % 100 < 75 THEN ARRAY['/currency']
                          WHEN g % 100 < 95 THEN ARRAY['/amount', '/to']
                          WHEN g % 100 < 99 THEN ARRAY['/memo']
                          ELSE ARRAY['/items/0/qty'] END AS paths,
                     CASE (g / 1000) % 50 WHEN 0 THEN 'open' ELSE CASE WHEN g % 50 < 41 THEN 'rejected' ELSE 'accepted' END END AS st) x`

// triageBenchDB is the 1M-record database of the triage benchmarks, filled
// once and kept (idemctl_bench_triage_<template digest>).
func triageBenchDB(b *testing.B) *pgxpool.Pool {
	ctx := context.Background()
	dsn, _ := dbtest.KeptDatabase(b, "idemctl_bench_triage_")
	pool, err := db.Open(ctx, dsn, db.Options{MaxConns: 2, StatementTimeout: 20 * time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM idem.quarantine").Scan(&n); err != nil {
		b.Fatal(err)
	}
	if n != benchRecords {
		start := time.Now()
		if _, err := pool.Exec(ctx, "TRUNCATE idem.quarantine"); err != nil && n > 0 {
			b.Fatalf("the kept database holds %d records, not %d: drop it (%v)", n, benchRecords, err)
		}
		if _, err := pool.Exec(ctx, triageFill, benchRecords); err != nil {
			b.Fatal(err)
		}
		if _, err := pool.Exec(ctx, "VACUUM ANALYZE idem.quarantine"); err != nil {
			b.Fatal(err)
		}
		b.Logf("filled %d quarantine records in %s", benchRecords, time.Since(start).Round(time.Second))
	}
	return pool
}

// medianOf runs f b.N times and reports the median latency (ms/median).
func medianOf(b *testing.B, f func() error) {
	durations := make([]time.Duration, 0, b.N)
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		err := f()
		durations = append(durations, time.Since(t0))
		if err != nil {
			b.Fatal(err)
		}
	}
	slices.Sort(durations)
	b.ReportMetric(float64(durations[len(durations)/2].Microseconds())/1000, "ms/median")
}

// BenchmarkQuarantineTriage measures each filter of `quarantine list` (a
// page of 50, first page and the page after it), the totals it prints
// (Count), and `quarantine groups`, over 1,000,000 records. Target: at most
// 50 ms median for a page. The database is filled once (a few minutes on 2
// cores) and kept for the next run.
func BenchmarkQuarantineTriage(b *testing.B) {
	ctx := context.Background()
	pool := triageBenchDB(b)
	all := quarantine.StatusAll
	day := time.Now().Add(-24 * time.Hour)
	cases := []struct {
		name   string
		filter quarantine.Filter
	}{
		{"op", quarantine.Filter{Status: all, Op: "op-123457"}},
		{"op_prefix", quarantine.Filter{Status: all, OpPrefix: "op-12345"}},
		{"op_prefix_open", quarantine.Filter{OpPrefix: "op-1"}},
		{"class", quarantine.Filter{Status: all, Class: "class-7"}},
		{"class_open", quarantine.Filter{Class: "class-7"}},
		{"changed", quarantine.Filter{Status: all, Changed: "/amount"}},
		{"changed_open", quarantine.Filter{Changed: "/to"}},
		{"changed_rare", quarantine.Filter{Status: all, Changed: "/x/rare"}},
		{"source", quarantine.Filter{Status: all, Source: "mobile"}},
		{"source_open", quarantine.Filter{Source: "mobile"}},
		{"since", quarantine.Filter{Status: all, Since: day}},
		{"until", quarantine.Filter{Status: all, Until: time.Now().Add(-60 * 24 * time.Hour)}},
		{"since_until_open", quarantine.Filter{Since: time.Now().Add(-40 * 24 * time.Hour), Until: time.Now().Add(-30 * 24 * time.Hour)}},
		{"group_open", quarantine.Filter{Group: &quarantine.GroupKey{Class: "class-3", IncomingClass: "class-3", Fields: []string{"/amount", "/to"}}}},
		{"tenant_changed", quarantine.Filter{Status: all, Tenant: "tenant-7", Changed: "/currency"}},
	}
	for _, tc := range cases {
		f := tc.filter
		f.Limit = 50
		first, err := quarantine.List(ctx, pool, f)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("list/"+tc.name+"/first", func(b *testing.B) {
			medianOf(b, func() error { _, err := quarantine.List(ctx, pool, f); return err })
		})
		if first.Next != nil {
			second := f
			second.After = first.Next
			b.Run("list/"+tc.name+"/second", func(b *testing.B) {
				medianOf(b, func() error { _, err := quarantine.List(ctx, pool, second); return err })
			})
		}
		b.Run("count/"+tc.name, func(b *testing.B) {
			medianOf(b, func() error { _, err := quarantine.Count(ctx, pool, f); return err })
		})
	}
	for _, g := range []struct {
		name string
		by   quarantine.GroupBy
	}{{"class_fields", quarantine.GroupBy{}}, {"tenant_source", quarantine.GroupBy{Tenant: true, Source: true}}} {
		b.Run("groups/"+g.name, func(b *testing.B) {
			medianOf(b, func() error {
				_, err := quarantine.Groups(ctx, pool, quarantine.GroupOptions{By: g.by, Limit: 50})
				return err
			})
		})
	}
}
