package recovery

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemctl/idemctl/idem"
)

//go:embed sql/conflict_evidence.sql
var conflictEvidenceSQL string

// maxAttempts bounds retries of an operation whose transaction the database
// asked to retry (serialization failure, deadlock, unsettled identity) or
// whose connection broke before it committed. Retrying is the protocol itself:
// the executor settles the identity again.
const maxAttempts = 3

// applyOne runs steps 1-4 for one operation. Only a refusal (not the primary)
// is returned as an error; every other failure is the operation's outcome.
func (r *Resolver) applyOne(ctx context.Context, j job) (Result, error) {
	for attempt := 1; ; attempt++ {
		res, err := r.applyTx(ctx, j)
		if err == nil {
			return res, nil
		}
		if isNotPrimary(err) {
			return Result{}, err
		}
		if attempt < maxAttempts && retryable(err) {
			time.Sleep(time.Duration(attempt*attempt) * 10 * time.Millisecond)
			continue
		}
		res = j.result()
		res.Outcome, res.Err = Failed, err
		if invalidRequest(err) {
			res.Outcome = Invalid
		}
		return res, nil
	}
}

// applyTx is one operation in one transaction: BEGIN; step 1 and the
// operator's name (idem.assert_primary); the atomic executor (idem.execute
// through the Go core); COMMIT, all in one pipeline, so one round trip. A
// conflict record is written and committed in the same transaction.
func (r *Resolver) applyTx(ctx context.Context, j job) (Result, error) {
	res := j.result()
	c, err := r.Pool.Acquire(ctx)
	if err != nil {
		return res, fmt.Errorf("acquire a connection: %w", err)
	}
	conn := c.Conn()
	defer func() {
		// A refused or failed pipeline leaves its transaction open (aborted).
		if conn.PgConn().TxStatus() != 'I' {
			_, _ = conn.Exec(context.Background(), "ROLLBACK")
		}
		c.Release()
	}()
	tx := &pipelinedTx{conn: conn, operator: r.Operator, commit: j.sqlEffect}
	var out idem.Result
	if j.sqlEffect {
		out, err = idem.ExecutePrepared(ctx, tx, j.p)
	} else {
		// The effect is application code: the executor can still settle an
		// identity that exists; one that is absent must not be claimed here.
		var claimed bool
		out, claimed, err = idem.Claim(ctx, tx, j.p)
		if err == nil && claimed {
			return res, errAppEffect
		}
	}
	if err != nil {
		return res, err
	}
	switch o := Outcome(out.Outcome); o {
	case Applied, AlreadyApplied, Purged:
		res.Outcome, res.Response = o, out.Response
		if o == AlreadyApplied {
			res.StoredHash = out.Hash
		}
	case Conflict:
		res.Outcome, res.QuarantineID = Conflict, out.QuarantineID
		var storedClass string
		if err := conn.QueryRow(ctx, conflictEvidenceSQL, out.QuarantineID).Scan(&res.StoredHash, &storedClass); err != nil {
			return res, fmt.Errorf("read conflict record %d: %w", out.QuarantineID, err)
		}
		if storedClass != j.p.Class {
			res.StoredClass = storedClass
		}
	default:
		return res, fmt.Errorf("the executor answered %q, which this idemctl does not know; upgrade idemctl", out.Outcome)
	}
	if !tx.commit {
		if _, err := conn.Exec(ctx, "COMMIT"); err != nil {
			return res, fmt.Errorf("commit %s: %w (%v); resolve it again to learn the outcome, which is safe", j.p.Identity, idem.ErrOutcomeUnknown, err)
		}
	}
	return res, nil
}

// pipelinedTx is the executor's DBTX for one operation. Its first QueryRow
// (the executor call) goes out in one pipeline behind BEGIN and step 1, and
// before COMMIT when commit is set. PostgreSQL skips the rest of a pipeline
// after an error, so a refusal by step 1 or a failed effect commits nothing.
// Later calls (the conflict record's id) run on the connection as they come.
type pipelinedTx struct {
	conn     *pgx.Conn
	operator string
	commit   bool
	sent     bool
}

func (t *pipelinedTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return t.conn.Exec(ctx, sql, args...)
}

func (t *pipelinedTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return t.conn.Query(ctx, sql, args...)
}

func (t *pipelinedTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if t.sent {
		return t.conn.QueryRow(ctx, sql, args...)
	}
	t.sent = true
	var b pgx.Batch
	b.Queue("BEGIN")
	b.Queue(beginOperationSQL, t.operator)
	b.Queue(sql, args...)
	if t.commit {
		b.Queue("COMMIT")
	}
	return &pipelinedRow{br: t.conn.SendBatch(ctx, &b), commit: t.commit}
}

type pipelinedRow struct {
	br     pgx.BatchResults
	commit bool
}

func (r *pipelinedRow) Scan(dest ...any) error {
	err := r.scan(dest)
	if cerr := r.br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return err
}

func (r *pipelinedRow) scan(dest []any) error {
	if _, err := r.br.Exec(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if _, err := r.br.Exec(); err != nil {
		return notPrimaryFrom(err)
	}
	if err := r.br.QueryRow().Scan(dest...); err != nil {
		return err
	}
	if r.commit {
		if _, err := r.br.Exec(); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
	}
	return nil
}

// retryable reports errors after which running the operation again is both
// safe (nothing committed, or the executor settles it) and likely to succeed.
func retryable(err error) bool {
	if errors.Is(err, idem.ErrSerialization) || errors.Is(err, idem.ErrUnsettled) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "40001" || pgErr.Code == "40P01"
	}
	return pgconn.SafeToRetry(err)
}

// invalidRequest reports refusals that are about the input line, not the
// database or the effect.
func invalidRequest(err error) bool {
	for _, s := range []error{idem.ErrInvalidIdentity, idem.ErrInvalidHash, idem.ErrUnknownClass, idem.ErrInvalidRequest, idem.ErrInvalidTransport} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}
