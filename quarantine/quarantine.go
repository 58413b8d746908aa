// Package quarantine is the review queue of conflicting retries: requests that
// reused an identity with another payload. Each record keeps its evidence (both
// payloads and hashes, the saved response, every differing field) and waits for
// a person to reject it or accept it as a new operation. Evidence, diff and
// decision rules live in the database (migrations/code: idem.record_conflict,
// idem.quarantine_reject, idem.quarantine_accept_as_new, which write their own
// audit rows); this package lists, shows, decides and exports.
package quarantine

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemctl/idemctl/idem"
)

var (
	//go:embed sql/show.sql
	showSQL string
	//go:embed sql/reject.sql
	rejectSQL string
	//go:embed sql/accept_as_new.sql
	acceptSQL string
)

// Audit actions written by this package.
const (
	ActionReject      = "quarantine.reject"        // written by idem.quarantine_reject
	ActionAcceptAsNew = "quarantine.accept_as_new" // written by idem.quarantine_accept_as_new
	ActionExport      = "quarantine.export"
)

// Page sizes for List.
const (
	DefaultLimit = 50
	MaxLimit     = 1000
)

// Errors. Database refusals are mapped from their SQLSTATEs (IX101-IX107), never
// from message text; the database's message, which names the record and the
// reason, is kept in the error.
var (
	// ErrNotFound: no quarantine record with that id.
	ErrNotFound = errors.New("quarantine record not found")
	// ErrAlreadyDecided: a decision is final; a second one is refused.
	ErrAlreadyDecided = errors.New("quarantine record already decided")
	// ErrDecisionInput: a decision without an operator or a reason.
	ErrDecisionInput = errors.New("a decision needs an operator and a reason")
	// ErrInvalidNewOperation: the new operation id is malformed or the
	// conflicting one itself.
	ErrInvalidNewOperation = errors.New("invalid new operation id")
	// ErrNewOperationConflict: the new identity already holds another payload;
	// nothing was executed or recorded.
	ErrNewOperationConflict = errors.New("new operation id already exists with another payload")
	// ErrCannotExecute: the class's effect is application code (no SQL
	// effect), which idemctl cannot run.
	ErrCannotExecute = errors.New("idemctl cannot run this class")
	// ErrEvidenceImmutable: a change to the evidence, or to a decision outside
	// the decision path, was refused.
	ErrEvidenceImmutable = errors.New("quarantine evidence is immutable")
	// ErrInvalidFilter: List was given a filter or cursor it cannot use.
	ErrInvalidFilter = errors.New("invalid quarantine filter")
)

// Status is where a record stands.
type Status string

// Statuses. StatusAll is only a List filter.
const (
	StatusOpen     Status = "open"     // waiting for a person; replays refused
	StatusRejected Status = "rejected" // never to run; replays refused for ever
	StatusAccepted Status = "accepted" // ran as a new operation (NewOperationID)
	StatusAll      Status = "all"
)

// ParseStatus reads a --status value.
func ParseStatus(s string) (Status, error) {
	switch st := Status(strings.ToLower(strings.TrimSpace(s))); st {
	case StatusOpen, StatusRejected, StatusAccepted, StatusAll:
		return st, nil
	}
	return "", fmt.Errorf("%w: status %q: use open, rejected, accepted or all", ErrInvalidFilter, s)
}

// Change is one differing value, as idem.json_diff computed it at conflict time.
type Change struct {
	// Path is an RFC 6901 JSON Pointer ("" is the whole payload).
	Path string `json:"path"`
	// Kind is added, removed, type_changed or changed; stored_purged when
	// the stored body was purged before the conflict (nothing to compare).
	Kind string `json:"change"`
	// Stored and Incoming are the two values; the absent side of an added or
	// removed value is JSON null (Kind tells it from a real null).
	Stored   json.RawMessage `json:"stored"`
	Incoming json.RawMessage `json:"incoming"`
	// PurgePlan and PurgedAt name the purge of a stored_purged side.
	PurgePlan *int64     `json:"purge_plan,omitempty"`
	PurgedAt  *time.Time `json:"purged_at,omitempty"`
}

// ChangeStoredPurged is the Kind of a change whose stored side was purged.
const ChangeStoredPurged = "stored_purged"

// Detection says where a conflict was first seen.
type Detection struct {
	// ApplicationName and DBUser are the detecting session's application_name
	// and database user.
	ApplicationName string `json:"application_name"`
	DBUser          string `json:"db_user"`
	// Operator is set when an operator tool (idemctl resolve) detected it.
	Operator string `json:"operator,omitempty"`
}

// Decision is what a person decided.
type Decision struct {
	At time.Time `json:"decided_at"`
	By string    `json:"decided_by"`
	// Person is the person behind the deciding login ("" when none).
	Person string `json:"person,omitempty"`
	DBUser string `json:"db_user"`
	Reason string `json:"reason"`
	// NewOperationID and NewOutcome are set when accepted: the incoming
	// payload ran as (tenant, NewOperationID) with this outcome.
	NewOperationID string `json:"new_operation_id,omitempty"`
	NewOutcome     string `json:"new_outcome,omitempty"`
	// AuditID is the audit row written with the decision.
	AuditID int64 `json:"audit_id"`
}

// Record is the whole evidence of one conflict.
type Record struct {
	ID            int64     `json:"id"`
	Tenant        string    `json:"tenant"`
	OperationID   string    `json:"operation_id"`
	Class         string    `json:"class"`
	IncomingClass string    `json:"incoming_class"`
	Status        Status    `json:"status"`
	Occurrences   int64     `json:"occurrences"`
	FirstSeen     time.Time `json:"first_seen"`
	LastSeen      time.Time `json:"last_seen"`

	StoredHash        string          `json:"stored_hash"`
	StoredPayload     json.RawMessage `json:"stored_payload"`
	StoredResponse    json.RawMessage `json:"stored_response"`
	IncomingHash      string          `json:"incoming_hash"`
	IncomingPayload   json.RawMessage `json:"incoming_payload"`
	IncomingTransport json.RawMessage `json:"incoming_transport"`

	Diff     []Change  `json:"diff"`
	Detected Detection `json:"detected"`
	Decision *Decision `json:"decision"`
}

// Identity is the conflicting request's identity.
func (r Record) Identity() idem.Identity {
	return idem.Identity{TenantID: r.Tenant, OperationID: r.OperationID}
}

// Summary is one line of List.
type Summary struct {
	ID            int64     `json:"id"`
	Tenant        string    `json:"tenant"`
	OperationID   string    `json:"operation_id"`
	Class         string    `json:"class"`
	IncomingClass string    `json:"incoming_class"`
	Status        Status    `json:"status"`
	Occurrences   int64     `json:"occurrences"`
	FirstSeen     time.Time `json:"first_seen"`
	LastSeen      time.Time `json:"last_seen"`
	// Changes is the number of differing values.
	Changes        int        `json:"changes"`
	DecidedAt      *time.Time `json:"decided_at"`
	DecidedBy      string     `json:"decided_by,omitempty"`
	NewOperationID string     `json:"new_operation_id,omitempty"`
	// DecidedPerson and DecidedDBUser are who decided: the person behind
	// the login (DecidedBy is the --operator label).
	DecidedPerson string `json:"decided_person,omitempty"`
	DecidedDBUser string `json:"decided_db_user,omitempty"`
	// Cursor resumes the listing after this record (--after).
	Cursor string `json:"cursor"`
}

// Show returns the whole evidence of one record.
func Show(ctx context.Context, db idem.DBTX, id int64) (Record, error) {
	var r Record
	var diff []byte
	var app, user, op, decidedBy, decidedPerson, decidedDBUser, reason, newOp, newOutcome *string
	var decidedAt *time.Time
	var auditID *int64
	err := db.QueryRow(ctx, showSQL, id).Scan(
		&r.ID, &r.Tenant, &r.OperationID, &r.Class, &r.IncomingClass, &r.Status, &r.Occurrences, &r.FirstSeen, &r.LastSeen,
		&r.StoredHash, &r.StoredPayload, &r.StoredResponse,
		&r.IncomingHash, &r.IncomingPayload, &r.IncomingTransport,
		&diff, &app, &user, &op,
		&decidedAt, &decidedBy, &decidedPerson, &decidedDBUser, &reason, &newOp, &newOutcome, &auditID)
	if errors.Is(err, pgx.ErrNoRows) {
		return Record{}, fmt.Errorf("%w: no record %d (idemctl quarantine list shows them)", ErrNotFound, id)
	}
	if err != nil {
		return Record{}, fmt.Errorf("load quarantine %d: %w", id, err)
	}
	if err := json.Unmarshal(diff, &r.Diff); err != nil {
		return Record{}, fmt.Errorf("load quarantine %d: diff: %w", id, err)
	}
	if r.Diff == nil {
		r.Diff = []Change{}
	}
	r.Detected = Detection{ApplicationName: deref(app), DBUser: deref(user), Operator: deref(op)}
	if decidedAt != nil {
		r.Decision = &Decision{
			At: *decidedAt, By: deref(decidedBy), Person: deref(decidedPerson), DBUser: deref(decidedDBUser), Reason: deref(reason),
			NewOperationID: deref(newOp), NewOutcome: deref(newOutcome),
		}
		if auditID != nil {
			r.Decision.AuditID = *auditID
		}
	}
	return r, nil
}

// checkDecision refuses a decision without operator or reason before anything
// is sent; the database checks again (idem.decision_input_problem).
func checkDecision(operator, reason string) error {
	if err := idem.CheckText("the operator label (--operator or IDEMCTL_OPERATOR)", operator, 256); err != nil {
		return fmt.Errorf("%w: %v", ErrDecisionInput, err)
	}
	if err := idem.CheckText("a reason (--reason)", reason, 4096); err != nil {
		return fmt.Errorf("%w: %v", ErrDecisionInput, err)
	}
	return nil
}

// Reject decides that the conflicting request must never run. The record
// stays as evidence; replays of that payload keep being refused and counted.
// The decision and its audit row commit together; nothing is written on error.
func Reject(ctx context.Context, db idem.TxBeginner, id int64, operator, reason string) (Record, error) {
	if err := checkDecision(operator, reason); err != nil {
		return Record{}, err
	}
	var rec Record
	err := inTx(ctx, db, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, rejectSQL, id, operator, reason)
		return mapError(err)
	})
	if err != nil {
		return Record{}, fmt.Errorf("reject quarantine %d: %w", id, err)
	}
	if rec, err = readBack(ctx, db, id); err != nil {
		return Record{}, fmt.Errorf("quarantine %d was rejected; reading it back: %w", id, err)
	}
	return rec, nil
}

// Acceptance is the result of AcceptAsNew.
type Acceptance struct {
	Record Record
	// Outcome is applied (the new operation ran now) or already_applied (the
	// new identity already held this very payload: linked, not run again).
	Outcome idem.Outcome
	// Response is the new operation's saved response.
	Response json.RawMessage
}

// AcceptAsNew decides that the incoming payload is a legitimate new operation
// and runs it, through the atomic executor (idem.execute), under
// (tenant, newOperationID), in the transaction that records the decision and
// its audit row. Two operators at once: the record's row lock queues them and
// the second is refused with ErrAlreadyDecided, whatever new id it asked for,
// so the payload runs once. If newOperationID already holds another payload,
// the whole decision is rolled back (ErrNewOperationConflict): nothing runs,
// nothing is recorded, not even a conflict record for the new identity.
func AcceptAsNew(ctx context.Context, db idem.TxBeginner, id int64, newOperationID, operator, reason string) (Acceptance, error) {
	if err := checkDecision(operator, reason); err != nil {
		return Acceptance{}, err
	}
	// The tenant is not known yet; any valid tenant checks the operation id part.
	if err := (idem.Identity{TenantID: "t", OperationID: newOperationID}).Validate(); err != nil {
		return Acceptance{}, fmt.Errorf("accept quarantine %d as new: %w: %v", id, ErrInvalidNewOperation, err)
	}
	var acc Acceptance
	err := inTx(ctx, db, func(tx pgx.Tx) error {
		var outcome string
		var auditID int64
		if err := tx.QueryRow(ctx, acceptSQL, id, newOperationID, operator, reason).Scan(&outcome, &acc.Response, &auditID); err != nil {
			return mapError(err)
		}
		acc.Outcome = idem.Outcome(outcome)
		return nil
	})
	if err != nil {
		return Acceptance{}, fmt.Errorf("accept quarantine %d as new operation %q: %w", id, newOperationID, err)
	}
	if acc.Record, err = readBack(ctx, db, id); err != nil {
		return Acceptance{}, fmt.Errorf("quarantine %d was accepted as new operation %q; reading it back: %w", id, newOperationID, err)
	}
	return acc, nil
}

// readBack reads a record after its decision committed, in a transaction of
// its own: on Citus a transaction may not read, as the operator's login, the
// shard that the decision function wrote as the schema owner.
func readBack(ctx context.Context, db idem.TxBeginner, id int64) (rec Record, err error) {
	err = inTx(ctx, db, func(tx pgx.Tx) error {
		rec, err = Show(ctx, tx, id)
		return err
	})
	return rec, err
}

// inTx runs fn in a transaction and commits. A failed commit after the
// decision was sent leaves its fate unknown, which the error says.
func inTx(ctx context.Context, db idem.TxBeginner, fn func(pgx.Tx) error) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w (%v); idemctl quarantine show tells whether the decision was recorded", idem.ErrOutcomeUnknown, err)
	}
	return nil
}

// mapError turns the decision path's SQLSTATEs into this package's errors,
// keeping the database's message (what, which record, who decided) and the
// driver error.
func mapError(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	var sentinel error
	switch pgErr.Code {
	case "IX101":
		sentinel = ErrNotFound
	case "IX102", "IX107":
		sentinel = ErrEvidenceImmutable
	case "IX103":
		sentinel = ErrAlreadyDecided
	case "IX104", "IX015":
		sentinel = ErrDecisionInput
	case "IX105", "IX001":
		sentinel = ErrInvalidNewOperation
	case "IX106":
		sentinel = ErrNewOperationConflict
	case "IX004":
		sentinel = ErrCannotExecute
	case "IX108":
		sentinel = ErrInvalidFilter
	case "IX125":
		sentinel = ErrNeedsSecondPerson
	default:
		return err
	}
	return &DBError{Sentinel: sentinel, Err: pgErr}
}

// DBError is a refusal by the database, mapped to a sentinel.
type DBError struct {
	Sentinel error
	Err      *pgconn.PgError
}

func (e *DBError) Error() string {
	msg := e.Err.Message
	if e.Err.Detail != "" {
		msg += " (" + e.Err.Detail + ")"
	}
	if e.Err.Hint != "" {
		msg += "; " + e.Err.Hint
	}
	return msg
}

// Unwrap exposes both the sentinel and the PostgreSQL error.
func (e *DBError) Unwrap() []error { return []error{e.Sentinel, e.Err} }

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
