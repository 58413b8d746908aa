package quarantine_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/idemctl/idemctl/internal/db"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/quarantine"
)

// benchRecords is the size of the quarantine the listing is measured on.
const benchRecords = 1_000_000

// fillQuarantine inserts n records in one INSERT ... SELECT: 1,000 tenants,
// activity spread over 90 days, 2% open (20 per tenant), about 80% rejected and
// 18% accepted.
const fillQuarantine = `
INSERT INTO idem.quarantine (
    tenant_id, operation_id, incoming_hash, op_class, stored_hash, stored_payload, stored_response,
    incoming_class, incoming_payload, diff, detected_app, detected_user,
    first_seen, last_seen, occurrences,
    status, decided_at, decided_by, decided_db_user, decision_reason, new_operation_id, new_outcome, decision_audit_id)
SELECT 'tenant-' || (g % 1000), 'op-' || g, 'jcs-sha256:' || lpad(to_hex(g), 64, 'b'), 'demo.transfer',
       'jcs-sha256:' || lpad(to_hex(g), 64, 'a'),
       jsonb_build_object('amount', g), jsonb_build_object('ok', true),
       'demo.transfer', jsonb_build_object('amount', g + 1),
       jsonb_build_array(jsonb_build_object('path', '/amount', 'change', 'changed', 'stored', g, 'incoming', g + 1)),
       'bench', 'postgres',
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
                     CASE (g / 1000) % 50 WHEN 0 THEN 'open' ELSE CASE WHEN g % 50 < 41 THEN 'rejected' ELSE 'accepted' END END AS st) x`

// BenchmarkQuarantineList measures one page (50 records) of `quarantine list`
// over a 1,000,000-record quarantine, first page and a deep page (a cursor 90%
// down the list), for status=open, status=all, a tenant, and a tenant's open
// records. It reports the median latency (ms/median) besides the mean.
// The 1M-row setup runs only under -bench (about a minute on 2 cores).
func BenchmarkQuarantineList(b *testing.B) {
	ctx := context.Background()
	dsn := dbtest.NewDatabase(b)
	pool, err := db.Open(ctx, dsn, db.Options{MaxConns: 2, StatementTimeout: 10 * time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	start := time.Now()
	if _, err := pool.Exec(ctx, fillQuarantine, benchRecords); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "VACUUM ANALYZE idem.quarantine"); err != nil {
		b.Fatal(err)
	}
	b.Logf("filled %d quarantine records in %s", benchRecords, time.Since(start).Round(time.Second))

	cases := []struct {
		name   string
		filter quarantine.Filter
	}{
		{"open", quarantine.Filter{Status: quarantine.StatusOpen}},
		{"all", quarantine.Filter{Status: quarantine.StatusAll}},
		{"rejected", quarantine.Filter{Status: quarantine.StatusRejected}},
		{"tenant", quarantine.Filter{Status: quarantine.StatusAll, Tenant: "tenant-7"}},
		{"tenant_open", quarantine.Filter{Status: quarantine.StatusOpen, Tenant: "tenant-7"}},
	}
	for _, tc := range cases {
		// The deep cursor: the record 90% down this listing.
		var total int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM idem.quarantine
			WHERE ($1 = 'all' OR status = $1) AND ($2::text IS NULL OR tenant_id = $2)`,
			string(tc.filter.Status), nullIfEmpty(tc.filter.Tenant)).Scan(&total); err != nil {
			b.Fatal(err)
		}
		var deep quarantine.Cursor
		if err := pool.QueryRow(ctx, `SELECT last_seen, id FROM idem.quarantine
			WHERE ($1 = 'all' OR status = $1) AND ($2::text IS NULL OR tenant_id = $2)
			ORDER BY last_seen DESC, id DESC OFFSET $3 LIMIT 1`,
			string(tc.filter.Status), nullIfEmpty(tc.filter.Tenant), total*9/10).Scan(&deep.LastSeen, &deep.ID); err != nil {
			b.Fatal(err)
		}
		for _, page := range []string{"first", "deep"} {
			f := tc.filter
			f.Limit = 50
			if page == "deep" {
				f.After = &deep
			}
			b.Run(tc.name+"/"+page, func(b *testing.B) {
				durations := make([]time.Duration, 0, b.N)
				for i := 0; i < b.N; i++ {
					t0 := time.Now()
					p, err := quarantine.List(ctx, pool, f)
					durations = append(durations, time.Since(t0))
					if err != nil {
						b.Fatal(err)
					}
					if want := min(50, total-total*9/10-1); page == "first" && len(p.Items) != min(50, total) ||
						page == "deep" && len(p.Items) != want {
						b.Fatalf("%s page of %d records (of %d)", page, len(p.Items), total)
					}
				}
				slices.Sort(durations)
				b.ReportMetric(float64(durations[len(durations)/2].Microseconds())/1000, "ms/median")
			})
		}
	}
}

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}
