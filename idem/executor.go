package idem

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemctl/idemctl/internal/pgerr"
)

// Outcome is what the executor concluded for one request.
type Outcome string

// Outcomes of the atomic executor.
const (
	// Applied: the identity was new; the effect ran and its response was saved.
	Applied Outcome = "applied"
	// AlreadyApplied: the identity exists with the same hash; nothing ran and
	// the saved response is returned.
	AlreadyApplied Outcome = "already_applied"
	// Conflict: the identity exists with another payload; nothing ran and the
	// request is recorded in idem.quarantine.
	Conflict Outcome = "conflict"
	// Purged: the identity was applied and later purged under a proven replay
	// horizon (idemctl horizon); same hash: nothing ran, and the response is no
	// longer kept (nil).
	Purged Outcome = "purged"
)

// MaxTransportBytes bounds the tracing metadata kept with an inbox row.
const MaxTransportBytes = 16 << 10

// Errors the executor maps PostgreSQL errors to. The SQLSTATEs are documented
// in the code package (migrations/code) and the README.
var (
	ErrInvalidHash      = errors.New("invalid payload hash")
	ErrUnknownClass     = errors.New("unknown operation class")
	ErrNoSQLEffect      = errors.New("class has no SQL effect")
	ErrNotClaimed       = errors.New("identity not claimed in this transaction")
	ErrClaimPending     = errors.New("claim not completed before commit")
	ErrNUL              = errors.New("payload contains U+0000, which PostgreSQL jsonb cannot store")
	ErrUnsettled        = errors.New("identity could not be settled")
	ErrInvalidClass     = errors.New("invalid class registration")
	ErrInvalidRequest   = errors.New("invalid request")
	ErrSerialization    = errors.New("serialization failure: retry the transaction")
	ErrOutcomeUnknown   = errors.New("outcome unknown: the commit was not acknowledged")
	ErrInvalidTransport = errors.New("invalid transport metadata")
	// ErrHashMismatch: the hash sent is not the SHA-256 of the payload text
	// sent; the database refused it and wrote nothing.
	ErrHashMismatch = errors.New("payload hash does not match the payload")
	// ErrPayloadLimit: the database refused a payload over its size or
	// depth limit.
	ErrPayloadLimit = errors.New("payload over the database's limits")
	// ErrClaimedNotCompleted: the identity was claimed in this very
	// transaction and is not completed yet.
	ErrClaimedNotCompleted = errors.New("identity claimed in this transaction and not completed")
	// ErrSQLEffectClass: claim and complete refuse a class whose effect is
	// SQL; only idem.execute records its identity, with its effect.
	ErrSQLEffectClass = errors.New("class has a SQL effect: only idem.execute records it")
	// ErrEffectRefused: the class's effect no longer passes the checks of
	// its registration (changed, dropped, or its owner given more rights);
	// nothing ran.
	ErrEffectRefused = errors.New("effect no longer passes its registration checks")
)

// Command is one request to the executor, as received.
type Command struct {
	Identity
	// Class names a registered operation class (idem.op_class).
	Class string
	// Payload is the request body as received (any valid JSON); it is
	// canonicalised and hashed before anything is sent.
	Payload []byte
	// Transport is optional tracing metadata (a JSON object: topic, partition,
	// offset, webhook delivery id). It never takes part in identity or hashing.
	Transport json.RawMessage
}

// Prepared is a validated Command with its canonical payload and hash.
type Prepared struct {
	Command
	Canonical []byte
	Hash      string
}

// Result is the executor's answer for one request.
type Result struct {
	Outcome Outcome
	// Response is the saved response (applied, already_applied); nil on conflict.
	Response json.RawMessage
	// Hash is the canonical hash of the incoming payload.
	Hash string
	// QuarantineID is the conflict record's id when Outcome is Conflict.
	QuarantineID int64
}

// DBTX is what the executor needs from a pool, a connection or a transaction.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// TxBeginner starts transactions; *pgxpool.Pool and *pgx.Conn satisfy it.
type TxBeginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Prepare validates a command (identity, class, payload, transport) and computes
// its canonical form and hash. Nothing touches the database.
func Prepare(cmd Command, lim PayloadLimits) (Prepared, error) {
	if err := cmd.Identity.Validate(); err != nil {
		return Prepared{}, err
	}
	if strings.TrimSpace(cmd.Class) == "" {
		return Prepared{}, fmt.Errorf("%w: class is required", ErrInvalidRequest)
	}
	if len(cmd.Transport) > 0 {
		if len(cmd.Transport) > MaxTransportBytes {
			return Prepared{}, fmt.Errorf("%w: %d bytes, at most %d", ErrInvalidTransport, len(cmd.Transport), MaxTransportBytes)
		}
		v := jsontext.Value(cmd.Transport)
		if !v.IsValid() || v.Kind() != '{' {
			return Prepared{}, fmt.Errorf("%w: must be a JSON object", ErrInvalidTransport)
		}
		if hasNULEscape(cmd.Transport) {
			return Prepared{}, fmt.Errorf("%w: it contains U+0000 (\\u0000), which PostgreSQL jsonb cannot store; drop or encode that value", ErrInvalidTransport)
		}
	}
	canonical, hash, err := Canonicalize(cmd.Payload, lim)
	if err != nil {
		return Prepared{}, err
	}
	if len(canonical) > DefaultMaxPayloadBytes {
		// The database bounds the canonical text (idem.check_request), which
		// can be longer than the input (1E2 is 100).
		return Prepared{}, newPayloadError(ErrPayloadTooLarge, fmt.Sprintf("payload: its canonical form is %d bytes; at most %d",
			len(canonical), DefaultMaxPayloadBytes))
	}
	if hasNULEscape(canonical) {
		// Refused here, so that a dry run, a real run and a service agree before
		// any database call (the database would refuse it with 22P05 and the
		// conflict it may be would go unrecorded).
		return Prepared{}, fmt.Errorf("%w: send binary data encoded (e.g. base64)", ErrNUL)
	}
	return Prepared{Command: cmd, Canonical: canonical, Hash: hash}, nil
}

// Execute prepares cmd with the default payload limits and runs it through
// idem.execute. On a pool the call commits by itself; in a transaction the
// caller commits (a conflict record is then part of that transaction).
func Execute(ctx context.Context, db DBTX, cmd Command) (Result, error) {
	p, err := Prepare(cmd, PayloadLimits{})
	if err != nil {
		return Result{}, err
	}
	return ExecutePrepared(ctx, db, p)
}

// ExecutePrepared runs a prepared command through idem.execute, the class's SQL
// effect included.
func ExecutePrepared(ctx context.Context, db DBTX, p Prepared) (Result, error) {
	return scanResult(p, db.QueryRow(ctx, executeSQL, p.Args()...))
}

// executeSQL and claimSQL call the executor with a prepared command's Args.
const (
	executeSQL = "SELECT outcome, response, quarantine_id FROM idem.execute($1, $2, $3, $4, $5, $6)"
	claimSQL   = "SELECT outcome, response, quarantine_id FROM idem.claim($1, $2, $3, $4, $5, $6)"
)

// Args are the executor's arguments for p: tenant, operation, class, the
// canonical payload as text, its hash and the transport (or NULL).
func (p Prepared) Args() []any {
	return []any{p.TenantID, p.OperationID, p.Class, string(p.Canonical), p.Hash, transportArg(p.Transport)}
}

// QueueExecute queues p's idem.execute call on b; its result, read with
// ScanQueued, is the Result ExecutePrepared would return. It lets a caller
// send the call in one round trip with other statements (BEGIN, a primary
// check, COMMIT).
func QueueExecute(b *pgx.Batch, p Prepared) *pgx.QueuedQuery {
	return b.Queue(executeSQL, p.Args()...)
}

// ScanQueued reads the result of a call queued with QueueExecute.
func ScanQueued(p Prepared, row pgx.Row) (Result, error) { return scanResult(p, row) }

func scanResult(p Prepared, row pgx.Row) (Result, error) {
	res := Result{Hash: p.Hash}
	var outcome string
	var qid *int64
	if err := row.Scan(&outcome, &res.Response, &qid); err != nil {
		return Result{}, mapError(p, err)
	}
	res.Outcome = Outcome(outcome)
	if qid != nil {
		res.QuarantineID = *qid
	}
	return res, nil
}

// EffectFunc is a Go effect: it runs inside the executor's transaction and
// returns the response to save. Returning an error rolls everything back.
type EffectFunc func(ctx context.Context, tx pgx.Tx) (json.RawMessage, error)

// ExecuteFunc runs a Go effect under the same protocol as idem.execute, using
// the same SQL (idem.claim, then idem.complete): the inbox row, whatever fn
// writes through tx and the saved response commit together. fn runs only when
// the identity is new. The class is registered with a NULL effect.
func ExecuteFunc(ctx context.Context, db TxBeginner, cmd Command, fn EffectFunc) (Result, error) {
	p, err := Prepare(cmd, PayloadLimits{})
	if err != nil {
		return Result{}, err
	}
	return ExecuteFuncPrepared(ctx, db, p, fn)
}

// ExecuteFuncPrepared is ExecuteFunc for a command already prepared (whose
// validation errors the caller has answered itself).
func ExecuteFuncPrepared(ctx context.Context, db TxBeginner, p Prepared, fn EffectFunc) (Result, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()

	res, claimed, err := Claim(ctx, tx, p)
	if err != nil {
		return Result{}, err
	}
	if claimed {
		resp, err := fn(ctx, tx)
		if err != nil {
			return Result{}, fmt.Errorf("effect of %s: %w", p.Identity, err)
		}
		if resp, err = Complete(ctx, tx, p.Identity, resp); err != nil {
			return Result{}, err
		}
		res.Outcome, res.Response = Applied, resp
	}
	if err := tx.Commit(ctx); err != nil {
		if claimed {
			return Result{}, fmt.Errorf("commit %s: %w (%v); run it again with the same identity to learn the outcome", p.Identity, ErrOutcomeUnknown, err)
		}
		return Result{}, fmt.Errorf("commit %s: %w", p.Identity, mapError(p, err))
	}
	return res, nil
}

// Claim runs idem.claim in tx. When claimed is true the caller holds the new
// inbox row and must run the effect and Complete before committing; otherwise
// res is already_applied (with the saved response), purged or conflict.
func Claim(ctx context.Context, tx DBTX, p Prepared) (res Result, claimed bool, err error) {
	return ScanClaim(p, tx.QueryRow(ctx, claimSQL, p.Args()...))
}

// QueueClaim queues p's idem.claim call on b; read its result with ScanClaim.
func QueueClaim(b *pgx.Batch, p Prepared) *pgx.QueuedQuery {
	return b.Queue(claimSQL, p.Args()...)
}

// ScanClaim reads the result of an idem.claim call (see Claim).
func ScanClaim(p Prepared, row pgx.Row) (res Result, claimed bool, err error) {
	var outcome string
	var qid *int64
	if err := row.Scan(&outcome, &res.Response, &qid); err != nil {
		return Result{}, false, mapError(p, err)
	}
	res.Hash = p.Hash
	if qid != nil {
		res.QuarantineID = *qid
	}
	if outcome == "claimed" {
		return res, true, nil
	}
	res.Outcome = Outcome(outcome)
	return res, false, nil
}

// Complete saves the response of an identity claimed in tx and returns it as
// stored (JSON null when resp is empty).
func Complete(ctx context.Context, tx DBTX, id Identity, resp json.RawMessage) (json.RawMessage, error) {
	if len(resp) == 0 {
		resp = json.RawMessage("null")
	}
	if !jsontext.Value(resp).IsValid() {
		return nil, fmt.Errorf("effect of %s returned a response that is not valid JSON", id)
	}
	if _, err := tx.Exec(ctx, "SELECT idem.complete($1, $2, $3)", id.TenantID, id.OperationID, []byte(resp)); err != nil {
		return nil, mapError(Prepared{Command: Command{Identity: id}}, err)
	}
	return resp, nil
}

// hasNULEscape reports whether canonical JSON holds the escape \u0000 inside
// a string (canonical JSON escapes U+0000 that way and nowhere else; an escaped
// backslash followed by "u0000" is text, not the escape).
// HasNULEscape says whether a JSON text holds the escape of U+0000 in a
// string, which PostgreSQL's jsonb cannot store (22P05).
func HasNULEscape(text []byte) bool { return hasNULEscape(text) }

func hasNULEscape(canonical []byte) bool {
	for i := 0; i+5 < len(canonical); i++ {
		if canonical[i] != '\\' {
			continue
		}
		if string(canonical[i+1:i+6]) == "u0000" {
			return true
		}
		i++ // skip the escaped character, e.g. the second backslash of "\\"
	}
	return false
}

func transportArg(t json.RawMessage) any {
	if len(t) == 0 {
		return nil
	}
	return []byte(t)
}

// executorErrors maps the executor's SQLSTATEs to this package's errors;
// the error's text is the database's message, which names what is wrong.
var executorErrors = pgerr.Table{Codes: map[string]error{
	"IX001": ErrInvalidIdentity,
	"IX002": ErrInvalidHash,
	"IX003": ErrUnknownClass,
	"IX004": ErrNoSQLEffect,
	"IX005": ErrNotClaimed,
	"IX006": ErrInvalidRequest,
	"IX007": ErrUnsettled,
	"IX008": ErrInvalidClass,
	"IX009": ErrClaimPending,
	"IX010": ErrHashMismatch,
	"IX011": ErrPayloadLimit,
	"IX012": ErrInvalidTransport,
	"IX013": ErrSQLEffectClass,
	"IX014": ErrClaimedNotCompleted,
	"IX016": ErrEffectRefused,
	"40001": ErrSerialization,
	"40P01": ErrSerialization,
}}

// mapError turns executor SQLSTATEs into this package's errors, keeping the
// database's message and the original error; any other database error was
// raised while running the request (usually by the effect).
func mapError(p Prepared, err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return fmt.Errorf("execute %s: %w", p.Identity, err)
	}
	if e := executorErrors.Find(err); e != nil {
		return e
	}
	return &EffectError{Identity: p.Identity, Class: p.Class, Err: pgErr}
}

// EffectError is a failure raised while running a request, usually by the
// class's effect (a bad amount, a constraint). Nothing was written.
type EffectError struct {
	Identity Identity
	Class    string
	Err      *pgconn.PgError
}

func (e *EffectError) Error() string {
	return fmt.Sprintf("%s %s failed: %s (SQLSTATE %s)", e.Class, e.Identity, e.Err.Message, e.Err.Code)
}

// Unwrap returns the PostgreSQL error.
func (e *EffectError) Unwrap() error { return e.Err }
