package quarantine_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/idemctl/idemctl/quarantine"
)

// benchRecords is the size of the quarantine the listing is measured on.
const benchRecords = 1_000_000

// BenchmarkQuarantineList measures one page (50 records) of `quarantine list`
// over a 1,000,000-record quarantine, first page and a deep page (a cursor 90%
// down the list), for status=open, status=all, a tenant, and a tenant's open
// records. It reports the median latency (ms/median) besides the mean.
// The 1M-row setup runs only under -bench, once (triageBenchDB keeps it).
func BenchmarkQuarantineList(b *testing.B) {
	ctx := context.Background()
	// The triage benchmark's kept database: the same distribution of
	// statuses and tenants, filled once.
	pool := triageBenchDB(b)

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
