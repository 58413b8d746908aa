package idem_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/idemctl/idemctl/internal/dbtest"
)

// The demo transfer's canonical payload for account pair :n % 64 and amount
// 1 + :n % 1000 (members in RFC 8785 order), as pgbench builds it; replayed
// identities have accounts of their own (applying them in one statement
// would otherwise update the same 64 balances thousands of times).
const (
	pgbenchPayload       = `'{"amount":' || (1 + :n % 1000) || ',"currency":"EUR","from":"a' || (:n % 64) || '","to":"b' || (:n % 64) || '"}'`
	pgbenchReplayPayload = `'{"amount":' || (1 + :n % 1000) || ',"currency":"EUR","from":"r' || :n || '","to":"s' || :n || '"}'`
)

// Scripts, one statement a transaction as a service calls the executor
// (pgbench -M simple): the bare effect with no inbox; idem.execute of a new
// operation; idem.execute of one of the replayIdentities applied before
// (already_applied). The hash is computed in SQL from the same text; the
// payload text is built alike in all three.
var (
	pgbenchBare = `\set n random(1, 1000000000)
SELECT demo.transfer_effect('bench-' || (:n % 64), 'base-' || gen_random_uuid(), (` + pgbenchPayload + `)::jsonb);
`
	pgbenchApplied = `\set n random(1, 1000000000)
SELECT outcome FROM idem.execute('bench-' || (:n % 64), 'new-' || gen_random_uuid(), 'demo.transfer', ` + pgbenchPayload + `,
  'jcs-sha256:' || encode(sha256(convert_to(` + pgbenchPayload + `, 'UTF8')), 'hex'));
`
	pgbenchReplay = `\set n random(1, ` + strconv.Itoa(replayIdentities) + `)
SELECT outcome FROM idem.execute('replay', 'op-' || :n, 'demo.transfer', ` + pgbenchReplayPayload + `,
  'jcs-sha256:' || encode(sha256(convert_to(` + pgbenchReplayPayload + `, 'UTF8')), 'hex'));
`
)

const replayIdentities = 20000

// BenchmarkExecutePgbench measures the executor as services call it, through
// pgbench in simple query mode, against the bare effect in the same run, on
// 1 and 8 connections: applied (a new operation) and already_applied (a
// replay: reads only, no commit flush). Targets: already_applied >= 2.0x the
// bare effect, applied >= 0.85x. Run with
//
//	go test ./idem -run '^$' -bench BenchmarkExecutePgbench -benchtime 1x
func BenchmarkExecutePgbench(b *testing.B) {
	dsn := dbtest.NewDatabase(b)
	admin := dbtest.As(dsn, dbtest.Superuser)
	app := dbtest.As(dsn, dbtest.App)
	// The replayed identities, applied once through the executor, a
	// thousand a transaction.
	for from := 1; from <= replayIdentities; from += 1000 {
		dbtest.Admin(b, dsn, `SELECT count(*) FROM generate_series($1::int, $1::int + 999) AS n,
			LATERAL (SELECT '{"amount":' || (1 + n % 1000) || ',"currency":"EUR","from":"r' || n || '","to":"s' || n || '"}' AS p) AS x,
			LATERAL idem.execute('replay', 'op-' || n, 'demo.transfer', x.p, 'jcs-sha256:' || encode(sha256(convert_to(x.p, 'UTF8')), 'hex')) AS e`, from)
	}
	dbtest.Admin(b, dsn, "VACUUM ANALYZE idem.identity, idem.inbox_body")
	wconn, err := pgx.Connect(context.Background(), admin)
	if err != nil {
		b.Fatal(err)
	}
	defer wconn.Close(context.Background())
	for _, conns := range []int{1, 8} {
		var bare float64
		for _, c := range []struct {
			name, dsn, script string
		}{{"baseline_bare_effect", admin, pgbenchBare}, {"applied", app, pgbenchApplied}, {"already_applied", app, pgbenchReplay}} {
			b.Run(fmt.Sprintf("%s/conns=%d", c.name, conns), func(b *testing.B) {
				var tps, wal float64
				var txs int64
				for range b.N {
					lsn := dbtest.WALPosition(b, wconn)
					t, n := dbtest.Pgbench(b, c.dsn, c.script, conns, 10)
					wal += dbtest.WALSince(b, wconn, lsn)
					tps, txs = tps+t, txs+n
				}
				tps /= float64(b.N)
				b.ReportMetric(tps, "ops/s")
				b.ReportMetric(wal/float64(txs), "WAL_B/op")
				b.ReportMetric(0, "ns/op")
				if bare == 0 {
					bare = tps
				} else {
					b.ReportMetric(tps/bare, "x_bare")
				}
			})
		}
	}
}
