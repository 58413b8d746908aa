package idem_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/idemctl/idemctl/internal/dbtest"
)

// BenchmarkExecutePartitions measures replays and applied calls (pgbench -M
// simple, one connection, the scripts of BenchmarkExecutePgbench) on an
// inbox of 1,000 day partitions (a class kept for ever, about three years
// of days, all but today's empty) against the same inbox with 10, two
// databases built alike and measured in alternation, three rounds, the
// median of each. Target: both within 10% (x_10 >= 0.9). Run with
//
//	go test ./idem -run '^$' -bench BenchmarkExecutePartitions -benchtime 1x
func BenchmarkExecutePartitions(b *testing.B) {
	const rounds, seconds = 3, 5
	few, many := partitionedInbox(b, 10), partitionedInbox(b, 1000)
	for _, c := range []struct{ name, script string }{{"already_applied", pgbenchReplay}, {"applied", pgbenchApplied}} {
		b.Run(c.name, func(b *testing.B) {
			var base, tps []float64
			for range b.N {
				for range rounds {
					t, _ := dbtest.Pgbench(b, dbtest.As(few, dbtest.App), c.script, 1, seconds)
					base = append(base, t)
					t, _ = dbtest.Pgbench(b, dbtest.As(many, dbtest.App), c.script, 1, seconds)
					tps = append(tps, t)
				}
			}
			slices.Sort(base)
			slices.Sort(tps)
			b.ReportMetric(base[len(base)/2], "ops/s_10")
			b.ReportMetric(tps[len(tps)/2], "ops/s_1000")
			b.ReportMetric(tps[len(tps)/2]/base[len(base)/2], "x_10")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// partitionedInbox is a fresh database whose inbox has parts day
// partitions (today's, the week ahead, the rest days in the past) holding
// the replayed identities of BenchmarkExecutePgbench.
func partitionedInbox(b *testing.B, parts int) string {
	dsn := dbtest.NewDatabase(b)
	// Day partitions by hand: idem.inbox_body_ensure gives long-past days
	// a partition a month. Then ensure rebuilds the body reader.
	if err := dbtest.Owner(dsn, fmt.Sprintf(`DO $$
		DECLARE d date;
		BEGIN
			FOR k IN 1..%d LOOP
				d := (now() AT TIME ZONE 'UTC')::date - k;
				EXECUTE format('CREATE TABLE idem.%%I PARTITION OF idem.inbox_body FOR VALUES FROM (%%L) TO (%%L)',
				               'inbox_body_p' || to_char(d, 'YYYYMMDD'), d::timestamp AT TIME ZONE 'UTC', (d + 1)::timestamp AT TIME ZONE 'UTC');
			END LOOP;
		END $$`, parts-8)); err != nil {
		b.Fatal(err)
	}
	if err := dbtest.Owner(dsn, "SELECT idem.inbox_body_ensure((now() AT TIME ZONE 'UTC')::date, (now() AT TIME ZONE 'UTC')::date + 7)"); err != nil {
		b.Fatal(err)
	}
	var n int
	for _, c := range dbtest.Column[int64](b, dbtest.PoolAs(b, dsn, dbtest.Superuser, 1), "SELECT count(*) FROM idem.inbox_body_partitions()") {
		n = int(c)
	}
	if n != parts+1 { // and the default
		b.Fatalf("inbox has %d partitions, want %d and the default", n, parts)
	}
	for from := 1; from <= replayIdentities; from += 1000 {
		dbtest.Admin(b, dsn, `SELECT count(*) FROM generate_series($1::int, $1::int + 999) AS n,
			LATERAL (SELECT '{"amount":' || (1 + n % 1000) || ',"currency":"EUR","from":"r' || n || '","to":"s' || n || '"}' AS p) AS x,
			LATERAL idem.execute('replay', 'op-' || n, 'demo.transfer', x.p, 'jcs-sha256:' || encode(sha256(convert_to(x.p, 'UTF8')), 'hex')) AS e`, from)
	}
	dbtest.Admin(b, dsn, "VACUUM ANALYZE idem.identity, idem.inbox_body")
	return dsn
}
