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

	"github.com/idemctl/idemctl/internal/pgerr"

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
	// ErrProviderAnswer: a provider's answer was refused as a record (IX127):
	// the inbox holds the identity, or the answer is not a 4xx with a body.
	ErrProviderAnswer = errors.New("the provider's answer cannot be recorded")
	// ErrImportedFinished: accept-as-new refused (IX128) for a record whose
	// incoming side an import brought: the old store finished that
	// operation, so running it again would repeat it. Reject the record; a
	// really new operation is recorded by hand (idemctl record).
	ErrImportedFinished = errors.New("the old store finished this operation: it cannot run again as new")
)

// Stored sides: what a record holds as the other side of the conflict.
const (
	// StoredInbox: the inbox's payload and saved response.
	StoredInbox = "inbox"
	// StoredTombstone: the stored side was purged; its hash and class remain.
	StoredTombstone = "tombstone"
	// StoredProvider: nothing here holds the identity; the other side is a
	// provider's answer (status and body) that the key was used there with
	// another payload. StoredResponse holds the answer; there is no stored
	// payload and no stored hash.
	StoredProvider = "provider"
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

	// StoredSide is inbox, tombstone or provider (StoredProvider: the
	// stored response is the provider's answer, and nothing is stored here).
	StoredSide        string          `json:"stored_side"`
	StoredHash        string          `json:"stored_hash"`
	StoredPayload     json.RawMessage `json:"stored_payload"`
	StoredResponse    json.RawMessage `json:"stored_response"`
	IncomingHash      string          `json:"incoming_hash"`
	IncomingPayload   json.RawMessage `json:"incoming_payload"`
	IncomingTransport json.RawMessage `json:"incoming_transport"`

	// Entered is set when the incoming side entered without its effect, by
	// an import (the old store's finished operation) or a record of an
	// outcome known from outside: accept-as-new refuses it (IX128). Its
	// JSON key stays "imported" (scripts read it), whichever way it came.
	Entered *EnteredSide `json:"imported,omitempty"`

	Diff     []Change  `json:"diff"`
	Detected Detection `json:"detected"`
	Decision *Decision `json:"decision"`
}

// EnteredSide is what an import, or a record of an outcome known from
// outside, kept of the operation that became a conflict's incoming side (in
// its transport): how it came (By: "import" or "record"), the plan that
// brought it and the answer. That operation is done: accept-as-new is
// refused for it (IX128).
type EnteredSide struct {
	By        string `json:"by"`
	EntryPlan int64  `json:"entry_plan"`
	// OldStoreResponse is the answer the old store saved when it finished
	// the operation, or the one recorded by hand (null for a record made
	// before it was kept).
	OldStoreResponse json.RawMessage `json:"old_store_response"`
}

// How says in words how the incoming side came and why it never runs.
func (s EnteredSide) How() string {
	if s.By == "record" {
		return fmt.Sprintf("recorded by hand as done (entry plan %d)", s.EntryPlan)
	}
	return fmt.Sprintf("imported (entry plan %d): the old store finished it", s.EntryPlan)
}

// enteredSide reads EnteredSide from an incoming transport written by
// idem.import_run or idem.import_run_chunk (entered_by import) or by
// idem.entry_plan_run (entered_by record); nil otherwise.
func enteredSide(transport []byte) *EnteredSide {
	var t struct {
		EnteredBy string          `json:"entered_by"`
		EntryPlan int64           `json:"entry_plan"`
		Response  json.RawMessage `json:"old_store_response"`
	}
	if len(transport) == 0 || json.Unmarshal(transport, &t) != nil || (t.EnteredBy != "import" && t.EnteredBy != "record") {
		return nil
	}
	if len(t.Response) == 0 {
		t.Response = json.RawMessage("null")
	}
	return &EnteredSide{By: t.EnteredBy, EntryPlan: t.EntryPlan, OldStoreResponse: t.Response}
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
	Changes int `json:"changes"`
	// StoredSide is inbox, tombstone or provider (see Record).
	StoredSide     string     `json:"stored_side"`
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
		&r.StoredSide, &r.StoredHash, &r.StoredPayload, &r.StoredResponse,
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
	r.Entered = enteredSide(r.IncomingTransport)
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

// decisionErrors maps the decision path's SQLSTATEs to this package's
// errors; the error's text is the database's message (what, which record,
// who decided), its detail and its hint.
var decisionErrors = pgerr.Table{Codes: map[string]error{
	"IX101": ErrNotFound,
	"IX102": ErrEvidenceImmutable,
	"IX107": ErrEvidenceImmutable,
	"IX103": ErrAlreadyDecided,
	"IX104": ErrDecisionInput,
	"IX015": ErrDecisionInput,
	"IX105": ErrInvalidNewOperation,
	"IX001": ErrInvalidNewOperation,
	"IX106": ErrNewOperationConflict,
	"IX004": ErrCannotExecute,
	"IX108": ErrInvalidFilter,
	"IX125": ErrNeedsSecondPerson,
	"IX127": ErrProviderAnswer,
	"IX128": ErrImportedFinished,
}}

func mapError(err error) error { return decisionErrors.Map(err) }

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

// ProviderAnswer is what a provider answered a request that reused a key
// with another payload: the other side of a conflict nothing here holds.
type ProviderAnswer struct {
	Status int    `json:"status"`
	Body   string `json:"body"`
	// Via is http or nats; Target where the request was sent.
	Via    string `json:"via,omitempty"`
	Target string `json:"target,omitempty"`
}

// RecordProviderAnswer quarantines a request the provider refused as a
// reused key (a 422) while the inbox holds no identity: the payload sent
// (canonical, with its hash) and the provider's answer as the stored side
// (idem.quarantine_provider_answer; operators only, audited). Returns the
// record's id; a repeat of the same payload counts on the same record.
func RecordProviderAnswer(ctx context.Context, db idem.DBTX, id idem.Identity, class string, canonical []byte, hash string,
	answer ProviderAnswer, operator string) (int64, error) {
	raw, err := json.Marshal(answer)
	if err != nil {
		return 0, err
	}
	var qid int64
	err = db.QueryRow(ctx, "SELECT idem.quarantine_provider_answer($1, $2, $3, $4, $5, $6, $7)",
		id.TenantID, id.OperationID, class, string(canonical), hash, string(raw), operator).Scan(&qid)
	if err != nil {
		return 0, fmt.Errorf("quarantine the provider's answer for %s: %w", id, mapError(err))
	}
	return qid, nil
}

// ProviderRecords returns the ids of the records of an identity whose other
// side is a provider's answer (the inbox holds nothing of it), oldest first.
func ProviderRecords(ctx context.Context, db idem.DBTX, id idem.Identity) ([]int64, error) {
	rows, err := db.Query(ctx, `SELECT id FROM idem.quarantine
		WHERE tenant_id = $1 AND operation_id = $2 AND holds_on = 'provider' ORDER BY id`, id.TenantID, id.OperationID)
	if err != nil {
		return nil, fmt.Errorf("provider answers of %s: %w", id, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("provider answers of %s: %w", id, err)
	}
	return ids, nil
}
