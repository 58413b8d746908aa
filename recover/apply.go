package recovery

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

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
// operator's name; the atomic executor (idem.execute through the Go core);
// COMMIT. A conflict record is written in the same transaction.
func (r *Resolver) applyTx(ctx context.Context, j job) (Result, error) {
	res := j.result()
	tx, err := r.Pool.Begin(ctx)
	if err != nil {
		return res, fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if err := beginOperation(ctx, tx, r.Operator); err != nil {
		return res, err
	}
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
		if err := tx.QueryRow(ctx, conflictEvidenceSQL, out.QuarantineID).Scan(&res.StoredHash, &storedClass); err != nil {
			return res, fmt.Errorf("read conflict record %d: %w", out.QuarantineID, err)
		}
		if storedClass != j.p.Class {
			res.StoredClass = storedClass
		}
	default:
		return res, fmt.Errorf("the executor answered %q, which this idemctl does not know; upgrade idemctl", out.Outcome)
	}
	if err := tx.Commit(ctx); err != nil {
		return res, fmt.Errorf("commit %s: %w (%v); resolve it again to learn the outcome, which is safe", j.p.Identity, idem.ErrOutcomeUnknown, err)
	}
	return res, nil
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
