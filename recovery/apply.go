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

//go:embed sql/entered_by.sql
var enteredBySQL string

// maxSerialAttempts bounds the attempts of an operation whose transaction the
// database rolled back and asked to retry (serialization failure, deadlock,
// unsettled identity). Retrying is the protocol itself: the executor settles
// the identity again.
const maxSerialAttempts = 3

// ErrNoSavedResponse: the identity exists with the same payload but without a
// saved response. The database refuses to commit a claim (idem.claim) without
// its idem.complete, so only a write behind its back (triggers disabled, a
// hand-edited restore) leaves that: the effect may or may not have run, so
// this is not an answer anyone can rely on.
var ErrNoSavedResponse = errors.New("identity exists without a saved response (claimed but never completed); investigate")

// applyOne runs steps 1-4 for one operation until it has an answer. absent,
// when set, says a lookup just found the identity absent (and the primary's
// clock then): a re-driven class is sent to its service at once. A refusal
// (not the primary) and a database that stays unreachable are returned as
// errors that stop the run, as is errStopped when the run stopped while the
// operation waited to be retried; the operation then has no answer (Outcome
// empty), except a conflict already committed. Every other failure is the
// operation's outcome.
//
// A connection failure after the pipeline was sent leaves the outcome
// unknown: the protocol runs again on a new connection, which is safe by
// design (the executor answers already_applied, or applies what did not
// commit), with backoff, for Config.RetryFor at most.
func (r *Resolver) applyOne(ctx context.Context, stop <-chan struct{}, j job, absent *primaryClock) (Result, error) {
	if j.inputOther != 0 {
		return r.answerAmbiguous(ctx, stop, j)
	}
	if j.redrive != nil && j.idempotent {
		if absent != nil {
			return r.redriveOne(ctx, stop, j, *absent)
		}
		res, found, clk, err := r.lookRedriven(ctx, j)
		switch {
		case isNotPrimary(err):
			return Result{}, err
		case err == nil && found:
			return res, nil
		case err == nil:
			return r.redriveOne(ctx, stop, j, clk)
		}
		// Anything else (a lost connection): the protocol, with its retries.
	}
	res, err := r.settle(ctx, stop, j)
	if errors.Is(err, errAppEffect) {
		if j.redrive != nil {
			return r.redriveOne(ctx, stop, j, res.checkedAt)
		}
		return failed(j, err), nil
	}
	return res, err
}

// settle is applyOne without step 3 for application-code classes: when the
// identity is absent and the class's effect is application code it returns
// errAppEffect, nothing written (the claim it made was rolled back).
func (r *Resolver) settle(ctx context.Context, stop <-chan struct{}, j job) (Result, error) {
	wait := r.backoff()
	serial := 0
	maybeCommitted := false // a lost attempt had sent its pipeline
	for {
		if !r.ops.wait(stop) {
			return Result{unknown: maybeCommitted}, errStopped
		}
		res, err := r.applyTx(ctx, j)
		var lost *lostError
		var committed *committedConflict
		if !errors.As(err, &lost) {
			r.reachable()
		}
		switch {
		case err == nil:
			if wait.lost > 0 {
				res.Note = fmt.Sprintf("settled on a new connection: %d earlier attempt(s) lost theirs before the outcome was known", wait.lost)
			}
			return res, nil
		case isNotPrimary(err):
			return Result{unknown: maybeCommitted}, err
		case errors.As(err, &committed):
			return r.readConflict(ctx, stop, j, &wait, committed.err)
		case errors.As(err, &lost):
			maybeCommitted = maybeCommitted || lost.sent
			if werr := wait.again(lost.err, stop); werr != nil {
				return Result{unknown: maybeCommitted}, werr
			}
		case retryable(err) && serial < maxSerialAttempts-1:
			serial++
			time.Sleep(time.Duration(serial*serial) * 10 * time.Millisecond)
		case errors.Is(err, errAppEffect):
			return res, err
		default:
			return failed(j, err), nil
		}
	}
}

// failed is the answer for an operation that was not settled, worded by what
// is known about what was written.
func failed(j job, err error) Result {
	res := j.result()
	res.Outcome = Failed
	var pgErr *pgconn.PgError
	switch {
	case invalidRequest(err):
		res.Outcome, res.Err = Invalid, err
	case errors.Is(err, ErrNoSavedResponse), errors.Is(err, errAppEffect):
		res.Err = err
	case errors.As(err, &pgErr):
		// Raised by the server inside the transaction, before COMMIT or by
		// COMMIT itself: the transaction was rolled back.
		res.Err = fmt.Errorf("%w; rolled back, nothing written", err)
	default:
		res.Err = fmt.Errorf("%w; the outcome is unknown: resolve it again to learn it (safe), never resubmit it under a new operation_id", err)
	}
	return res
}

// committedConflict: the executor answered conflict and COMMIT succeeded (the
// conflict record is written), then reading the record back failed.
type committedConflict struct{ err error }

func (e *committedConflict) Error() string {
	return "conflict recorded, reading its record failed: " + e.err.Error()
}

// readConflict answers a conflict that is committed, reading its record on
// another connection (with the same backoff as the operation). If it cannot,
// the answer is still conflict, with a note saying where to look.
func (r *Resolver) readConflict(ctx context.Context, stop <-chan struct{}, j job, wait *backoff, cause error) (Result, error) {
	res := j.result()
	res.Outcome = Conflict
	for {
		var storedClass string
		var diff []byte
		err := r.Pool.QueryRow(ctx, conflictEvidenceSQL, j.p.TenantID, j.p.OperationID, j.p.Hash, j.p.Class).Scan(&res.QuarantineID, &res.StoredHash, &storedClass, &diff)
		if err == nil {
			res.Changes = changesFrom(diff)
			if storedClass != j.p.Class {
				res.StoredClass = storedClass
			}
			return res, nil
		}
		if !connectionFailure(err) {
			res.Note = fmt.Sprintf("quarantined, but its record could not be read (%v): idemctl quarantine list --tenant %s", err, j.p.TenantID)
			return res, nil
		}
		if werr := wait.again(err, stop); werr != nil {
			res.Note = fmt.Sprintf("quarantined, but its record could not be read (%v): idemctl quarantine list --tenant %s", cause, j.p.TenantID)
			return res, werr
		}
	}
}

// applyTx is one operation in one transaction: BEGIN; step 1 and the
// operator's name (idem.assert_primary); the atomic executor (idem.execute,
// or idem.claim for an application-code class); COMMIT, all in one pipeline,
// so one round trip. PostgreSQL skips the rest of a pipeline after an error,
// so a refusal by step 1 or a failed effect commits nothing. A conflict
// record is written and committed in the same transaction.
//
// A connection failure comes back as a *lostError, unless COMMIT had already
// succeeded: then the outcome is what the executor said.
func (r *Resolver) applyTx(ctx context.Context, j job) (res Result, err error) {
	res = j.result()
	c, err := r.Pool.Acquire(ctx)
	if err != nil {
		return res, &lostError{err: fmt.Errorf("acquire a connection: %w", err)}
	}
	conn := c.Conn()
	pl := &pipeline{conn: conn, commit: j.sqlEffect}
	defer func() {
		if err != nil && !pl.committed && !isNotPrimary(err) && (connectionFailure(err) || conn.PgConn().IsClosed()) {
			err = &lostError{err: err, sent: pl.sent}
		}
		// A refused or failed pipeline leaves its transaction open (aborted).
		if !conn.PgConn().IsClosed() && conn.PgConn().TxStatus() != 'I' {
			rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, _ = conn.Exec(rctx, "ROLLBACK")
			cancel()
		}
		c.Release()
	}()
	out, claimed, err := pl.run(ctx, r, j)
	switch {
	case err != nil && pl.committed:
		return res, &committedConflict{err}
	case errors.Is(err, idem.ErrClaimedNotCompleted):
		// The executor found a body without a response. This transaction
		// claimed nothing before it, so that body was committed so (only
		// behind the database's back: a commit with a pending claim is
		// refused), not "claimed in this transaction" as the SQL says for
		// its own caller. Reported as the dry run reports it.
		return res, ErrNoSavedResponse
	case err != nil:
		return res, err
	case claimed:
		// The effect is application code: the executor can still settle an
		// identity that exists; one that is absent must not be claimed here.
		res.checkedAt = clockFrom(pl.clock)
		return res, errAppEffect
	}
	if err := r.answer(ctx, conn, j, out, pl.committed, &res); err != nil {
		return res, err
	}
	if !pl.commit {
		if _, err := conn.Exec(ctx, "COMMIT"); err != nil {
			return res, fmt.Errorf("commit %s: %w", j.p.Identity, err)
		}
	}
	if res.Outcome == AlreadyApplied {
		noteEntered(ctx, conn, j, &res)
	}
	return res, nil
}

// noteEntered notes, after the commit, an already_applied identity that an
// entry plan entered without its effect, as the lookup does. The outcome is
// settled whatever this read does: a failed read leaves the note out.
func noteEntered(ctx context.Context, conn *pgx.Conn, j job, res *Result) {
	var plan int64
	var enteredBy *string
	if err := conn.QueryRow(ctx, enteredBySQL, j.p.TenantID, j.p.OperationID).Scan(&plan, &enteredBy); err == nil {
		res.Note, res.EntryPlan = enteredWithoutEffect(plan, enteredBy), plan
	}
}

// answer turns the executor's result into the operation's, reading a
// conflict's evidence (stored hash and class) on the connection.
func (r *Resolver) answer(ctx context.Context, conn *pgx.Conn, j job, out idem.Result, committed bool, res *Result) error {
	switch o := Outcome(out.Outcome); o {
	case Applied, AlreadyApplied, Purged:
		if o == AlreadyApplied && out.Response == nil {
			return ErrNoSavedResponse
		}
		res.Outcome, res.Response = o, out.Response
		if o == AlreadyApplied || o == Purged {
			// Purged: the tombstone holds this payload's hash, as the
			// lookup (and a dry run) reports it.
			res.StoredHash = out.Hash
		}
	case Conflict:
		res.Outcome, res.QuarantineID = Conflict, out.QuarantineID
		var storedClass string
		var diff []byte
		if err := conn.QueryRow(ctx, conflictEvidenceSQL, j.p.TenantID, j.p.OperationID, j.p.Hash, j.p.Class).Scan(&res.QuarantineID, &res.StoredHash, &storedClass, &diff); err != nil {
			if committed {
				return &committedConflict{err}
			}
			return fmt.Errorf("read conflict record %d: %w", out.QuarantineID, err)
		}
		if storedClass != j.p.Class {
			res.StoredClass = storedClass
		}
		res.Changes = changesFrom(diff)
	default:
		return fmt.Errorf("the executor answered %q, which this idemctl does not know; upgrade idemctl", out.Outcome)
	}
	return nil
}

// pipeline sends one operation's transaction in one round trip.
type pipeline struct {
	conn   *pgx.Conn
	commit bool
	sent   bool
	// committed is set once COMMIT's result has been read and was not an
	// error: from then on the outcome is settled, whatever the connection does.
	committed bool
	// clock is the primary's clock when step 1 ran.
	clock time.Time
}

// run sends BEGIN, step 1, the check that no entry plan not yet run holds
// the identity (idem.entry_pending_check: it enters it without its effect),
// the executor call (idem.execute for a SQL effect,
// else idem.claim) and, for a SQL effect, COMMIT; and reads their results.
func (pl *pipeline) run(ctx context.Context, r *Resolver, j job) (out idem.Result, claimed bool, err error) {
	var b pgx.Batch
	b.Queue("BEGIN")
	b.Queue(beginOperationSQL, r.Operator)
	b.Queue(entryPendingCheckSQL, j.p.TenantID, j.p.OperationID)
	if j.sqlEffect {
		idem.QueueExecute(&b, j.p)
		b.Queue("COMMIT")
	} else {
		idem.QueueClaim(&b, j.p)
	}
	br := pl.conn.SendBatch(ctx, &b)
	pl.sent = true
	if r.afterSend != nil {
		r.afterSend(ctx, pl.conn, j.p.Identity)
	}
	out, claimed, err = pl.read(br, j)
	// Once COMMIT has succeeded the outcome is settled: the connection
	// failing while the batch is closed (reading ReadyForQuery) changes
	// nothing about it.
	if cerr := br.Close(); err == nil && cerr != nil && !pl.committed {
		err = cerr
	}
	return out, claimed, err
}

func (pl *pipeline) read(br pgx.BatchResults, j job) (out idem.Result, claimed bool, err error) {
	if _, err := br.Exec(); err != nil {
		return out, false, fmt.Errorf("begin: %w", err)
	}
	if err := br.QueryRow().Scan(nil, &pl.clock); err != nil {
		return out, false, notPrimaryFrom(err)
	}
	if _, err := br.Exec(); err != nil {
		return out, false, err
	}
	if !j.sqlEffect {
		return idem.ScanClaim(j.p, br.QueryRow())
	}
	if out, err = idem.ScanQueued(j.p, br.QueryRow()); err != nil {
		return out, false, err
	}
	if _, err := br.Exec(); err != nil {
		return out, false, fmt.Errorf("commit: %w", err)
	}
	pl.committed = true
	return out, false, nil
}

// retryable reports errors after which the server rolled the transaction back
// and running the operation again is likely to succeed.
func retryable(err error) bool {
	if errors.Is(err, idem.ErrSerialization) || errors.Is(err, idem.ErrUnsettled) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "40001" || pgErr.Code == "40P01"
	}
	return false
}

// invalidRequest reports refusals that are about the input line, not the
// database or the effect.
func invalidRequest(err error) bool {
	for _, s := range []error{idem.ErrInvalidIdentity, idem.ErrInvalidHash, idem.ErrUnknownClass, idem.ErrInvalidRequest,
		idem.ErrInvalidTransport, idem.ErrHashMismatch, idem.ErrPayloadLimit} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}
