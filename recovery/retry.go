package recovery

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// DefaultRetryFor is how long an operation caught in a connection failure is
// retried before the run stops as unreachable: long enough for most
// failovers (a promotion, a proxy switching over), short enough that an
// operator is not left waiting on a database that is gone.
const DefaultRetryFor = 20 * time.Second

// Backoff between attempts after a connection failure: 100 ms doubling to 5 s.
const (
	retryFirst = 100 * time.Millisecond
	retryMax   = 5 * time.Second
)

// ErrUnreachable means the database could not be reached for Config.RetryFor
// while an operation was in flight: the run stopped. The operations in flight
// then have no answer (their outcome is unknown); running the same input again
// is safe and settles them.
var ErrUnreachable = errors.New("database unreachable")

// UnreachableError says how long the database was unreachable and the last
// connection error.
type UnreachableError struct {
	For time.Duration
	Err error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("database unreachable for %s (last error: %s)", e.For.Round(100*time.Millisecond),
		strings.Join(strings.Fields(e.Err.Error()), " "))
}

// Unwrap makes errors.Is(err, ErrUnreachable) true and keeps the last error.
func (e *UnreachableError) Unwrap() []error { return []error{ErrUnreachable, e.Err} }

// lostError is a connection failure while an operation was being started, in
// flight, or being acknowledged: whether its transaction committed is unknown
// (unless nothing had been sent). Running the protocol again settles it.
type lostError struct {
	err  error
	sent bool // the operation's pipeline had been sent (or was being sent)
}

func (e *lostError) Error() string { return "connection lost: " + e.err.Error() }
func (e *lostError) Unwrap() error { return e.err }

// errStopped: the run is stopping, so an operation waiting to be retried is
// left without an answer.
var errStopped = errors.New("run stopping")

// connectionFailure reports errors that mean the connection, not the
// transaction, failed: the server went away (FATAL, shutdown, 08xxx), the
// network broke, or a deadline passed. An ERROR the server raised inside the
// transaction is not one: the transaction was rolled back.
func connectionFailure(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		sev := pgErr.SeverityUnlocalized
		if sev == "" {
			sev = pgErr.Severity
		}
		switch {
		case sev == "FATAL" || sev == "PANIC":
			return true
		case strings.HasPrefix(pgErr.Code, "08"):
			return true
		case pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03":
			return true
		}
		return false
	}
	var netErr net.Error
	var connectErr *pgconn.ConnectError
	return errors.As(err, &netErr) || errors.As(err, &connectErr) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		pgconn.Timeout(err) || pgconn.SafeToRetry(err)
}

// backoff paces the attempts of one operation (or dry-run batch) after
// connection failures, within a budget counted from the first failure.
type backoff struct {
	budget time.Duration
	since  time.Time
	next   time.Duration
	lost   int // attempts that failed on the connection
	// down, when set, is marked with the time of the first failure of an
	// outage (Resolver.Outage).
	down *atomic.Int64
}

// again waits before another attempt after err, a connection failure. It
// returns an *UnreachableError when the budget is spent and errStopped when
// the run stops while waiting.
func (b *backoff) again(err error, stop <-chan struct{}) error {
	now := time.Now()
	if b.down != nil {
		b.down.CompareAndSwap(0, now.UnixNano())
	}
	if b.since.IsZero() {
		b.since, b.next = now, retryFirst
	}
	b.lost++
	waited := now.Sub(b.since)
	// The last wait is cut to the budget, so the last attempt comes at its end.
	sleep := min(b.next, b.budget-waited)
	if sleep <= 0 {
		return &UnreachableError{For: waited, Err: err}
	}
	t := time.NewTimer(sleep)
	defer t.Stop()
	select {
	case <-t.C:
	case <-stop:
		return errStopped
	}
	b.next = min(2*b.next, retryMax)
	return nil
}
