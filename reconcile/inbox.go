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

	"github.com/idemctl/idemctl/recovery"
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
//
// A goroutine of its own opens the cursor and FETCHes ahead (at most
// inboxAhead batches wait): Run starts it before it reads the report, so
// the server sorts the window while the client parses and sorts the
// report, and the next batch travels while the merge works on this one.
type inboxStream struct {
	batches chan inboxBatch
	cancel  context.CancelFunc
	done    chan struct{}
	rows    []inboxRow
	pos     int
	end     bool
	err     error
}

// inboxBatch is one FETCH's rows, or the error that ended the stream.
type inboxBatch struct {
	rows []inboxRow
	err  error
}

// inboxAhead is how many fetched batches may wait for the merge.
const inboxAhead = 2

// openInbox starts reading the plan's class and window. Errors (the
// connection, the cursor) surface at the first next.
func openInbox(ctx context.Context, pool *pgxpool.Pool, p *plan, batch int) *inboxStream {
	ctx, cancel := context.WithCancel(ctx)
	s := &inboxStream{batches: make(chan inboxBatch, inboxAhead), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer close(s.batches)
		err := readInbox(ctx, pool, p, batch, func(rows []inboxRow) bool {
			select {
			case s.batches <- inboxBatch{rows: rows}:
				return true
			case <-ctx.Done():
				return false
			}
		})
		if err != nil {
			select {
			case s.batches <- inboxBatch{err: err}:
			case <-ctx.Done():
			}
		}
	}()
	return s
}

// readInbox declares the cursor and passes each FETCH's rows to put until
// the last one, or until put returns false.
func readInbox(ctx context.Context, pool *pgxpool.Pool, p *plan, batch int, put func([]inboxRow) bool) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("read the inbox: %w", err)
	}
	defer conn.Release()
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("read the inbox: %w", err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = tx.Rollback(rctx)
	}()
	// The first FETCH sorts the window's rows on the server: on a large
	// window that can outlast the pool's statement timeout (60s). This
	// read-only transaction alone gets a longer one.
	if _, err := tx.Exec(ctx, "SET LOCAL statement_timeout = '"+cursorStatementTimeout+"'"); err != nil {
		return fmt.Errorf("read the inbox: %w", err)
	}
	since := pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}
	until := pgtype.Timestamptz{InfinityModifier: pgtype.Infinity, Valid: true}
	if p.since != nil {
		since = pgtype.Timestamptz{Time: *p.since, Valid: true}
	}
	if p.until != nil {
		until = pgtype.Timestamptz{Time: *p.until, Valid: true}
	}
	// A report of one tenant (--tenant) is reconciled with that tenant's
	// operations only.
	var tenant *string
	if p.Tenant != "" {
		tenant = &p.Tenant
	}
	if _, err := tx.Exec(ctx, inboxCursorSQL, p.Class, since, until, tenant); err != nil {
		return fmt.Errorf("read the inbox of %s: %w", p.Class, err)
	}
	fetch := fmt.Sprintf("FETCH %d FROM reconcile_inbox", batch)
	for {
		rows, err := fetchInbox(ctx, tx, fetch, batch)
		if err != nil {
			return err
		}
		if len(rows) > 0 && !put(rows) {
			return nil
		}
		if len(rows) < batch {
			return nil
		}
	}
}

func fetchInbox(ctx context.Context, tx pgx.Tx, fetch string, batch int) ([]inboxRow, error) {
	rows, err := tx.Query(ctx, fetch)
	if err != nil {
		return nil, fmt.Errorf("read the inbox: %w", err)
	}
	defer rows.Close()
	out := make([]inboxRow, 0, batch)
	for rows.Next() {
		var r inboxRow
		if err := rows.Scan(&r.tenant, &r.op, &r.payload, &r.createdAt, &r.transport); err != nil {
			return nil, fmt.Errorf("read the inbox: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the inbox: %w", err)
	}
	return out, nil
}

// next returns the next operation; ok is false after the last one.
func (s *inboxStream) next(ctx context.Context) (row inboxRow, ok bool, err error) {
	for s.pos == len(s.rows) {
		if s.end {
			return inboxRow{}, false, s.err
		}
		var b inboxBatch
		select {
		case b, ok = <-s.batches:
		case <-ctx.Done():
			return inboxRow{}, false, ctx.Err()
		}
		if !ok || b.err != nil {
			s.end, s.err = true, b.err
			return inboxRow{}, false, s.err
		}
		s.rows, s.pos = b.rows, 0
	}
	row = s.rows[s.pos]
	s.rows[s.pos] = inboxRow{}
	s.pos++
	return row, true, nil
}

// close stops the reading, ends the transaction and releases the
// connection.
func (s *inboxStream) close() {
	s.cancel()
	<-s.done
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

// batcher sends a batch of statements in one round trip: a pool, a
// connection.
type batcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// lookup fetches a batch of identities (tenants[i], ops[i]) in one round
// trip; the answer's i-th entry is nil when the identity does not exist. It
// runs in a read-only transaction of its own whose plans are probes, as
// resolve's lookup (recover/sql/probe_only.sql): an over-estimate must not
// turn 5,000 keys into a read of every day partition.
func lookup(ctx context.Context, q batcher, tenants, ops []string, withPayload bool) ([]*stored, error) {
	out := make([]*stored, len(tenants))
	var batch pgx.Batch
	batch.Queue("BEGIN READ ONLY")
	batch.Queue(recovery.ProbeOnlyStatement())
	batch.Queue(lookupSQL, tenants, ops, withPayload)
	batch.Queue("COMMIT")
	br := q.SendBatch(ctx, &batch)
	defer br.Close()
	for range 2 {
		if _, err := br.Exec(); err != nil {
			return nil, fmt.Errorf("look up %d identities: %w", len(tenants), err)
		}
	}
	rows, err := br.Query()
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
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("look up %d identities: %w", len(tenants), err)
	}
	if _, err := br.Exec(); err != nil {
		return nil, fmt.Errorf("look up %d identities: %w", len(tenants), err)
	}
	return out, nil
}
