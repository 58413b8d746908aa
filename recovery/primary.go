package recovery

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

var (
	//go:embed sql/primary.sql
	primarySQL string
	//go:embed sql/begin_operation.sql
	beginOperationSQL string
	// entryPendingCheckSQL refuses an absent identity that an entry plan
	// not yet run holds (IX341).
	entryPendingCheckSQL = "SELECT idem.entry_pending_check($1, $2)"
	//go:embed sql/entry_pending.sql
	entryPendingSQL string
)

// ErrNotPrimary means the database is a standby or the session is read-only:
// nothing was concluded and nothing was written. The CLI maps it to exit code 4.
var ErrNotPrimary = errors.New("not the authoritative primary")

// PrimaryAdvice is how to reach the primary, appended to every refusal.
const PrimaryAdvice = "use a DSN naming the primary, or several hosts with target_session_attrs=read-write"

// NotPrimaryError says why the database was refused.
type NotPrimaryError struct {
	// InRecovery: the server is a standby (pg_is_in_recovery()).
	InRecovery bool
	// ReadOnly: the session or transaction is read-only.
	ReadOnly bool
}

func (e *NotPrimaryError) Error() string {
	why := "the session is read-only (default_transaction_read_only is on)"
	if e.InRecovery {
		why = "the server is a standby (in recovery)"
	}
	return "refused: " + why + "; nothing was concluded or written; " + PrimaryAdvice
}

// Unwrap makes errors.Is(err, ErrNotPrimary) true.
func (e *NotPrimaryError) Unwrap() error { return ErrNotPrimary }

// RowQuerier runs a query that returns one row: a pool, a connection, a
// transaction, or the first result of a pipelined batch.
type RowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// CheckPrimary is step 1 of the protocol: it returns a *NotPrimaryError when
// db is a standby or a read-only session, and the database clock otherwise.
func CheckPrimary(ctx context.Context, db RowQuerier) (time.Time, error) {
	var inRecovery, readOnly bool
	var now time.Time
	if err := db.QueryRow(ctx, primarySQL).Scan(&inRecovery, &readOnly, &now); err != nil {
		return time.Time{}, fmt.Errorf("check the server is the primary: %w", err)
	}
	if inRecovery || readOnly {
		return now, &NotPrimaryError{InRecovery: inRecovery, ReadOnly: readOnly}
	}
	return now, nil
}

// notPrimaryFrom maps idem.assert_primary's refusals to *NotPrimaryError.
func notPrimaryFrom(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "IX201":
			return &NotPrimaryError{InRecovery: true}
		case "IX202":
			return &NotPrimaryError{ReadOnly: true}
		}
	}
	return err
}

func isNotPrimary(err error) bool { return errors.Is(err, ErrNotPrimary) }
