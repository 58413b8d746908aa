package dbtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// WALPosition is the server's WAL insert position. WAL is server-wide: a
// benchmark that reports it must run on a quiet server.
func WALPosition(tb testing.TB, conn *pgx.Conn) string {
	tb.Helper()
	var lsn string
	if err := conn.QueryRow(context.Background(), "SELECT pg_current_wal_insert_lsn()::text").Scan(&lsn); err != nil {
		tb.Fatal(err)
	}
	return lsn
}

// WALSince is the number of WAL bytes inserted since lsn (a WALPosition).
func WALSince(tb testing.TB, conn *pgx.Conn, lsn string) float64 {
	tb.Helper()
	var n float64
	if err := conn.QueryRow(context.Background(), "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn)", lsn).Scan(&n); err != nil {
		tb.Fatal(err)
	}
	return n
}
