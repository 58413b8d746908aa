package reconcile

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

var (
	//go:embed sql/inbox_cursor.sql
	inboxCursorSQL string
	//go:embed sql/lookup.sql
	lookupSQL string
	//go:embed sql/pending_corrections.sql
	pendingCorrectionsSQL string
)

// DefaultBatchSize is how many identities one lookup sends, and how many
// inbox rows one FETCH reads.
const DefaultBatchSize = 5000

// cursorStatementTimeout bounds each statement of the inbox cursor's
// transaction (the first FETCH sorts the whole window).
const cursorStatementTimeout = "15min"

// DBTX is what the package reads through: a pool, a connection or a
// transaction.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// inboxRow is one live operation of the class in the window.
type inboxRow struct {
	tenant, op string
	payload    []byte
	createdAt  time.Time
	transport  []byte
}

// inboxStream reads the window's operations in identity order through a
// server-side cursor, one FETCH of batch rows at a time, in a read-only
// repeatable-read transaction on a connection of its own (one snapshot for
// the whole run; each FETCH is a statement of its own, under the statement
// timeout).
type inboxStream struct {
	conn  *pgxpool.Conn
	tx    pgx.Tx
	batch int
	rows  []inboxRow
	pos   int
	done  bool
}

// openInbox declares the cursor over the plan's class and window.
func openInbox(ctx context.Context, pool *pgxpool.Pool, p *plan, batch int) (*inboxStream, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the inbox: %w", err)
	}
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		conn.Release()
		return nil, fmt.Errorf("read the inbox: %w", err)
	}
	s := &inboxStream{conn: conn, tx: tx, batch: batch}
	// The first FETCH sorts the window's rows on the server: on a large
	// window that can outlast the pool's statement timeout (60s). This
	// read-only transaction alone gets a longer one.
	if _, err := tx.Exec(ctx, "SET LOCAL statement_timeout = '"+cursorStatementTimeout+"'"); err != nil {
		s.close()
		return nil, fmt.Errorf("read the inbox: %w", err)
	}
	since := pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}
	until := pgtype.Timestamptz{InfinityModifier: pgtype.Infinity, Valid: true}
	if p.since != nil {
		since = pgtype.Timestamptz{Time: *p.since, Valid: true}
	}
	if p.until != nil {
		until = pgtype.Timestamptz{Time: *p.until, Valid: true}
	}
	// A report of one tenant (a fixed --tenant) is compared with that
	// tenant's operations only: another tenant's are not missing from it.
	tenant := pgtype.Text{String: p.Tenant, Valid: p.Tenant != ""}
	if _, err := tx.Exec(ctx, inboxCursorSQL, p.Class, since, until, tenant); err != nil {
		s.close()
		return nil, fmt.Errorf("read the inbox of %s: %w", p.Class, err)
	}
	return s, nil
}

// next returns the next operation; ok is false after the last one.
func (s *inboxStream) next(ctx context.Context) (row inboxRow, ok bool, err error) {
	if s.pos == len(s.rows) {
		if s.done {
			return inboxRow{}, false, nil
		}
		if err := s.fetch(ctx); err != nil {
			return inboxRow{}, false, err
		}
		if len(s.rows) == 0 {
			return inboxRow{}, false, nil
		}
	}
	row = s.rows[s.pos]
	s.rows[s.pos] = inboxRow{}
	s.pos++
	return row, true, nil
}

func (s *inboxStream) fetch(ctx context.Context) error {
	rows, err := s.tx.Query(ctx, fmt.Sprintf("FETCH %d FROM reconcile_inbox", s.batch))
	if err != nil {
		return fmt.Errorf("read the inbox: %w", err)
	}
	defer rows.Close()
	s.rows, s.pos = s.rows[:0], 0
	for rows.Next() {
		var r inboxRow
		if err := rows.Scan(&r.tenant, &r.op, &r.payload, &r.createdAt, &r.transport); err != nil {
			return fmt.Errorf("read the inbox: %w", err)
		}
		s.rows = append(s.rows, r)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the inbox: %w", err)
	}
	s.done = len(s.rows) < s.batch
	return nil
}

// close ends the transaction and releases the connection.
func (s *inboxStream) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = s.tx.Rollback(ctx)
	s.conn.Release()
}

// stored is what the inbox holds for an identity.
type stored struct {
	class     string
	createdAt time.Time
	hash      string
	// purged: only the tombstone is left; payload and transport are nil.
	purged             bool
	payload, transport []byte
}

// lookup fetches a batch of identities (tenants[i], ops[i]) in one round
// trip; the answer's i-th entry is nil when the identity does not exist.
func lookup(ctx context.Context, q DBTX, tenants, ops []string, withPayload bool) ([]*stored, error) {
	out := make([]*stored, len(tenants))
	rows, err := q.Query(ctx, lookupSQL, tenants, ops, withPayload)
	if err != nil {
		return nil, fmt.Errorf("look up %d identities: %w", len(tenants), err)
	}
	defer rows.Close()
	for rows.Next() {
		var ord int32
		var s stored
		if err := rows.Scan(&ord, &s.class, &s.createdAt, &s.hash, &s.purged, &s.payload, &s.transport); err != nil {
			return nil, fmt.Errorf("look up %d identities: %w", len(tenants), err)
		}
		if ord >= 1 && int(ord) <= len(out) {
			out[ord-1] = &s
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("look up %d identities: %w", len(tenants), err)
	}
	return out, nil
}
