package dbtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// ClientBug is a simulated client bug: N retries of demo.transfer operations
// that the service first applied, then received again with a changed
// payload, through a transport naming Source.
type ClientBug struct {
	// Prefix starts each operation_id (Prefix + a 5-digit number, from 1).
	Prefix string
	// Tenants spreads the operations over tenant-0 .. tenant-(Tenants-1) (1 when 0).
	Tenants int
	N       int
	// Change is what the bug changed: "amount", "currency" or "amount+to".
	Change string
	Source string
}

// conflictFill applies N transfers, then their changed retries, as the app
// role: every retry goes through idem.execute and is quarantined by
// idem.record_conflict, as in production. Payloads are canonical (keys in
// RFC 8785 order, integers), so the hashes are the ones idemctl computes.
const conflictFill = `
WITH ops AS (
    SELECT g, 'tenant-' || (g % $3) AS tenant, $1 || lpad(g::text, 5, '0') AS op,
           format('{"amount":%s,"currency":"EUR","from":"alice","to":"bob"}', g) AS stored
    FROM generate_series(1, $2::int) g
), s AS (
    SELECT e.outcome FROM ops,
        LATERAL idem.execute(tenant, op, 'demo.transfer', stored,
                             'jcs-sha256:' || encode(sha256(convert_to(stored, 'UTF8')), 'hex'), NULL) e
)
SELECT count(*) FILTER (WHERE outcome = 'applied') FROM s`

const conflictRetry = `
WITH ops AS (
    SELECT g, 'tenant-' || (g % $3) AS tenant, $1 || lpad(g::text, 5, '0') AS op,
           CASE $4
               WHEN 'amount' THEN format('{"amount":%s,"currency":"EUR","from":"alice","to":"bob"}', g + 100000)
               WHEN 'currency' THEN format('{"amount":%s,"currency":"USD","from":"alice","to":"bob"}', g)
               ELSE format('{"amount":%s,"currency":"EUR","from":"alice","to":"carol"}', g + 100000)
           END AS incoming
    FROM generate_series(1, $2::int) g
), s AS (
    SELECT e.outcome FROM ops,
        LATERAL idem.execute(tenant, op, 'demo.transfer', incoming,
                             'jcs-sha256:' || encode(sha256(convert_to(incoming, 'UTF8')), 'hex'),
                             jsonb_build_object('source', $5::text)) e
)
SELECT count(*) FILTER (WHERE outcome = 'conflict') FROM s`

// SeedConflicts quarantines every bug's retries, through idem.execute as the
// app role, one statement per side and bug.
func SeedConflicts(t testing.TB, dsn string, bugs ...ClientBug) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, As(dsn, App))
	if err != nil {
		t.Fatalf("seed conflicts: %v", err)
	}
	defer conn.Close(ctx)
	for _, b := range bugs {
		tenants := max(b.Tenants, 1)
		for i, q := range []string{conflictFill, conflictRetry} {
			args := []any{b.Prefix, b.N, tenants}
			if i == 1 {
				args = append(args, b.Change, b.Source)
			}
			var n int
			if err := conn.QueryRow(ctx, q, args...).Scan(&n); err != nil {
				t.Fatalf("seed conflicts %s: %v", b.Prefix, err)
			}
			if n != b.N {
				t.Fatalf("seed conflicts %s: %d of %d operations went as expected (step %d)", b.Prefix, n, b.N, i)
			}
		}
	}
}

// Querier runs queries: a pool, a connection or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Column runs sql and returns its one column, or fails the test.
func Column[T any](t testing.TB, q Querier, sql string, args ...any) []T {
	t.Helper()
	rows, err := q.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[T])
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return out
}
