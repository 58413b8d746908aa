package recovery

import (
	"encoding/json"
	"time"
)

// Outcome is the final answer for one operation.
type Outcome string

// Outcomes of a run. The first five are final answers of a real run, the
// dry-run ones say what a real run would do; Invalid and Failed mean the line
// got no answer (Result.Err says why, and whether anything was written).
const (
	// AlreadyApplied: the identity exists with the same hash (and class); the
	// saved response is returned, nothing ran.
	AlreadyApplied Outcome = "already_applied"
	// Applied: the identity was absent and the operation ran now, in one
	// transaction with its inbox row and saved response.
	Applied Outcome = "applied"
	// Conflict: the identity exists with another payload or class; nothing ran
	// and the request is quarantined (Result.QuarantineID).
	Conflict Outcome = "conflict"
	// Purged: the identity was purged under a proven replay horizon and this
	// is its payload: it was applied, the response is no longer kept, and it
	// never runs again (the executor answers from the tombstone).
	Purged Outcome = "purged"
	// Invalid: the input line is bad (malformed JSON, missing field, invalid
	// identity, lossy number, too large, unknown class).
	Invalid Outcome = "invalid"
	// Failed ("error"): the operation was not settled. Its Err says why: an
	// effect or the database raised an error inside the transaction (rolled
	// back, nothing written), or the identity is in an unexpected state. A
	// lost connection is never reported as Failed: the operation is settled
	// again on a new connection, or the run stops (ErrUnreachable).
	Failed Outcome = "error"
	// WouldApply (dry run): the identity is absent; a real run would execute it.
	WouldApply Outcome = "would_apply"
	// WouldConflict (dry run): the identity exists with another payload or class.
	WouldConflict Outcome = "would_conflict"
	// WouldRedrive (dry run): the identity is absent and its class runs its
	// effect in a service: a real run would send it there (nothing is sent).
	WouldRedrive Outcome = "would_redrive"
	// Pending: re-driven through a message stream (NATS) that took it, but
	// not recorded on the primary within --retry-for: the service has not
	// processed it yet; or re-driven to a service that asked to be sent it
	// again later than --retry-for allows (Retry-After; Result.Note says
	// when). Running the input again settles it, never twice.
	Pending Outcome = "pending"
)

// Outcomes lists every outcome in the order summaries show them.
var Outcomes = []Outcome{AlreadyApplied, Applied, WouldApply, WouldRedrive, Purged, Pending, Conflict, WouldConflict, Invalid, Failed}

// Converged reports whether the outcome is a safe, final answer that needs no
// one's attention (exit code 0). A purged identity was covered by a proven
// horizon, which is such an answer.
func (o Outcome) Converged() bool {
	switch o {
	case AlreadyApplied, Applied, WouldApply, WouldRedrive, Purged:
		return true
	}
	return false
}

// Result is the answer for one operation.
type Result struct {
	// Line is the 1-based input line; 0 for an operation given on the command line.
	Line        int
	Tenant      string
	OperationID string
	Class       string
	Outcome     Outcome
	// Response is the saved response (applied, already_applied); nil otherwise
	// and in a dry run, which reads only what the comparison needs.
	Response json.RawMessage
	// StoredHash is the inbox's hash when the identity exists.
	StoredHash string
	// StoredClass is the inbox's class when it differs from Class (a conflict).
	StoredClass string
	// IncomingHash is the canonical hash of the line's payload.
	IncomingHash string
	// QuarantineID is the conflict record (Conflict only).
	QuarantineID int64
	// Err says what is wrong (Invalid, Failed).
	Err error
	// Note adds context to a settled answer: in a dry run, the earlier line of
	// the same input that decides this one; in a real run, that an earlier
	// attempt lost its connection before its outcome was known.
	Note string
	// Redrive is what was sent to the class's service, when it was re-driven.
	Redrive *RedriveTrace
	// Changes are the values that differ between the stored payload and
	// this one, in document order (a real run's conflict, from its
	// quarantine record; a dry run keeps no payloads and has none).
	Changes []Change
	// EntryPlan is the entry plan (record plan or import) that entered an
	// already_applied identity without its effect; 0 when it was applied
	// (Note then says so).
	EntryPlan int64
	// Conditional (dry run) says the prediction holds unless the operation's
	// own effect refuses it, when the real run answers error (rolled back,
	// nothing written): would_apply, would_redrive, and already_applied for
	// a later line of the same identity and payload as a would_apply line.
	// Every other prediction is exactly what the real run answers.
	Conditional bool

	skipped   bool         // dispatched but never answered (interrupted, or refused mid-run)
	checkedAt primaryClock // the primary's clock when step 1 found it absent (re-drive)
	unknown   bool         // with no answer, after a connection lost in flight (applyOne)
	// firstAttempt is the line's first_attempt_at (zero when not given).
	firstAttempt time.Time
}

// Counts are the number of results per outcome.
type Counts map[Outcome]int

// Total is the number of operations answered.
func (c Counts) Total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// RunSummary is what a run did, for the audit record and the final report.
type RunSummary struct {
	// Operator is who ran it (--operator, IDEMCTL_OPERATOR or the OS user).
	Operator string
	// Source names the input: a file name, "-" for stdin, or "command line".
	Source string
	// InputSHA256 is the hex SHA-256 of the whole input, when the caller
	// knows it (a file; stdin read to its end), so that the record names the
	// input by content as well as by name.
	InputSHA256 string
	DryRun      bool
	// StartedAt and FinishedAt come from the database clock.
	StartedAt  time.Time
	FinishedAt time.Time
	Counts     Counts
	// Read is the number of operations read; Read - Counts.Total() were never
	// started because the run was interrupted or refused midway.
	Read int
	// Unknown is how many of the operations read got no answer because their
	// connection was lost in flight and the run stopped before they could be
	// settled again: they may have committed. Running the input again settles
	// them. (The other unanswered ones were never started.)
	Unknown int
	// LastLine is the input line of the last operation read: nothing after it
	// was attempted.
	LastLine int
	// Interrupted is true when the run stopped before answering all of its
	// input (some lines unread, or read and never started).
	Interrupted bool
	// Redriven is how many operations were sent to their class's service
	// (at least one attempt connected).
	Redriven int
	// RedriveUnknown is how many of the Redriven got no usable answer and
	// are not recorded on the primary: their outcome is unknown (Failed,
	// ErrRedriveUnknown).
	RedriveUnknown int
	// Entered is how many already_applied identities were entered by an
	// entry plan without their effect (Result.EntryPlan).
	Entered int
	// Conditional is how many answers of a dry run are predictions that the
	// operation's own effect decides (Result.Conditional).
	Conditional int
	// NotSent is how many operations of a re-driven class never reached
	// their service: no attempt connected (Failed, ErrRedriveNotSent).
	NotSent int
	// Failover is the primary's last timeline switch, when it could be read.
	Failover *Failover
	// WriteErr is the first error writing results (emit or Config.Flush). The
	// run stopped reading there; Counts still count every answer, written or
	// not.
	WriteErr error
}

// Conflicts is the number of conflicts, real or dry-run.
func (s RunSummary) Conflicts() int { return s.Counts[Conflict] + s.Counts[WouldConflict] }

// Pending is the number of re-drives published but not yet recorded.
func (s RunSummary) Pending() int { return s.Counts[Pending] }

// Problems is the number of invalid lines and failed operations.
func (s RunSummary) Problems() int { return s.Counts[Invalid] + s.Counts[Failed] }

// Converged reports whether the whole input was read and every operation
// converged.
func (s RunSummary) Converged() bool {
	return !s.Interrupted && s.Conflicts() == 0 && s.Problems() == 0 && s.Pending() == 0
}

// Change is one value that differs between the stored payload and the
// incoming one.
type Change struct {
	// Pointer is the RFC 6901 JSON Pointer of the value ("" is the whole
	// payload).
	Pointer string `json:"pointer"`
	// Stored and Incoming are the two values; an absent side is JSON null.
	Stored   json.RawMessage `json:"stored"`
	Incoming json.RawMessage `json:"incoming"`
}

// changesFrom reads a quarantine record's diff (idem.json_diff); nil when
// it cannot.
func changesFrom(diff []byte) []Change {
	var raw []struct {
		Path     string          `json:"path"`
		Stored   json.RawMessage `json:"stored"`
		Incoming json.RawMessage `json:"incoming"`
	}
	if len(diff) == 0 || json.Unmarshal(diff, &raw) != nil {
		return nil
	}
	out := make([]Change, len(raw))
	for i, c := range raw {
		out[i] = Change{Pointer: c.Path, Stored: c.Stored, Incoming: c.Incoming}
	}
	return out
}
