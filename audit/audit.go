// Package audit is idemctl's tamper-evident record of operator actions
// (idem.audit): resolve runs, quarantine decisions and exports, purge plans,
// approvals and executions, class and person changes. The log is append-only
// and hash-chained in the database: every function that changes state writes
// its own row (migrations/code), and this package appends the reports that
// change nothing (a resolve run, an export), lists, and verifies the whole
// chain in Go, from the rows alone, never trusting a database function.
//
// The hashed bytes of a row are defined by RowHash (and the README), so that
// anyone can re-verify an exported log.
package audit

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemctl/idemctl/internal/pgerr"

	"github.com/idemctl/idemctl/idem"
)

var (
	//go:embed sql/append.sql
	appendSQL string
	//go:embed sql/list.sql
	listSQL string
	//go:embed sql/chain.sql
	chainSQL string
)

// GenesisHash is the prev_hash of row 1.
var GenesisHash = "sha256:" + strings.Repeat("0", 64)

// Limits the database enforces on an entry (idem.audit_write).
const (
	MaxActorBytes  = 256
	MaxActionBytes = 128
	MaxTargetBytes = 512
	// DefaultLimit is List's page size when Filter.Limit is not set.
	DefaultLimit = 50
	// MaxLimit is the largest page List returns.
	MaxLimit = 10000
)

// Errors. Database refusals are mapped from their SQLSTATEs (IX110-IX112).
var (
	// ErrInvalidEntry: an entry without actor or with a malformed action,
	// target or details; nothing was written.
	ErrInvalidEntry = errors.New("invalid audit entry")
	// ErrAppendOnly: an UPDATE, DELETE or TRUNCATE of idem.audit was refused.
	ErrAppendOnly = errors.New("the audit log is append-only")
	// ErrHeadTampered: the chain's head row is missing or was changed by hand.
	ErrHeadTampered = errors.New("the audit head was tampered with")
	// ErrChainBroken is wrapped by Report.Err when verification failed.
	ErrChainBroken = errors.New("audit chain broken")
	// ErrInvalidFilter: List was given a filter it cannot run.
	ErrInvalidFilter = errors.New("invalid audit filter")
	// ErrReservedAction: the action is written only by the database function
	// that performs it (a decision, a plan...), never appended as a report.
	ErrReservedAction = errors.New("audit action reserved to the function that performs it")
)

// DBTX is what the package needs from a pool, a connection or a transaction.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Entry is one action to record.
type Entry struct {
	// Actor is the operator (idemctl --operator, IDEMCTL_OPERATOR, OS user).
	// The database user is recorded beside it by the database itself.
	Actor string
	// Action is a dotted lower-case name: quarantine.reject, resolve.run,
	// horizon.purge.
	Action string
	// Target names what was acted on, e.g. "quarantine:42"; empty for none.
	Target string
	// Details is anything that marshals to a JSON object (nil means {}).
	Details any
}

// Record is one row of the log.
type Record struct {
	ID    int64     `json:"id"`
	At    time.Time `json:"at"`
	Actor string    `json:"actor"`
	// Person is the person behind the database login ("" when it maps to none).
	Person   string          `json:"person"`
	DBUser   string          `json:"db_user"`
	Action   string          `json:"action"`
	Target   string          `json:"target"`
	Details  json.RawMessage `json:"details"`
	PrevHash string          `json:"prev_hash"`
	Hash     string          `json:"hash"`
}

var actionRE = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$`)

// Validate checks an entry the way the database will, so that callers get a
// precise error before anything is sent.
func (e Entry) Validate() error {
	switch {
	case strings.TrimSpace(e.Actor) == "":
		return fmt.Errorf("%w: an actor (operator identity) is required", ErrInvalidEntry)
	case len(e.Actor) > MaxActorBytes:
		return fmt.Errorf("%w: actor is longer than %d bytes", ErrInvalidEntry, MaxActorBytes)
	case idem.CheckText("actor", e.Actor, MaxActorBytes) != nil:
		return fmt.Errorf("%w: %v", ErrInvalidEntry, idem.CheckText("actor", e.Actor, MaxActorBytes))
	case e.Target != "" && idem.CheckText("target", e.Target, MaxTargetBytes) != nil:
		return fmt.Errorf("%w: %v", ErrInvalidEntry, idem.CheckText("target", e.Target, MaxTargetBytes))
	case !actionRE.MatchString(e.Action) || len(e.Action) > MaxActionBytes:
		return fmt.Errorf("%w: action %q must be dotted lower-case words (e.g. quarantine.reject), at most %d bytes",
			ErrInvalidEntry, e.Action, MaxActionBytes)
	case len(e.Target) > MaxTargetBytes:
		return fmt.Errorf("%w: target is longer than %d bytes", ErrInvalidEntry, MaxTargetBytes)
	}
	return nil
}

func (e Entry) details() ([]byte, error) {
	if e.Details == nil {
		return []byte("{}"), nil
	}
	b, err := json.Marshal(e.Details)
	if err != nil {
		return nil, fmt.Errorf("%w: details: %v", ErrInvalidEntry, err)
	}
	if len(b) == 0 || b[0] != '{' {
		return nil, fmt.Errorf("%w: details must be a JSON object", ErrInvalidEntry)
	}
	return b, nil
}

// Append writes e at the end of the chain in db (normally the caller's
// transaction, which then holds the chain's head until it ends) and returns
// the row as chained.
func Append(ctx context.Context, db DBTX, e Entry) (Record, error) {
	if err := e.Validate(); err != nil {
		return Record{}, err
	}
	details, err := e.details()
	if err != nil {
		return Record{}, err
	}
	rec, err := scanRecord(db.QueryRow(ctx, appendSQL, e.Actor, e.Action, e.Target, string(details)))
	if err != nil {
		return Record{}, fmt.Errorf("append %s to the audit log: %w", e.Action, mapError(err))
	}
	return rec, nil
}

// Filter selects rows for List. Zero values mean no filter.
type Filter struct {
	// Action matches exactly, or as a namespace: "quarantine" matches
	// quarantine.reject and quarantine.export.
	Action string
	// Actor matches the --operator label (Record.Actor) exactly.
	Actor string
	// Who matches the person or the login exactly: what Record.Who shows
	// (person, then the login in parentheses).
	Who    string
	Target string
	// Since and Until bound `at` (Until exclusive).
	Since, Until time.Time
	// Before is the keyset cursor: only rows with a smaller id (the last id of
	// the previous page).
	Before int64
	// Limit is the page size (DefaultLimit when 0, at most MaxLimit).
	Limit int
}

// List returns rows newest first.
func List(ctx context.Context, db DBTX, f Filter) ([]Record, error) {
	if f.Limit < 0 || f.Limit > MaxLimit {
		return nil, fmt.Errorf("%w: limit must be between 1 and %d", ErrInvalidFilter, MaxLimit)
	}
	if f.Limit == 0 {
		f.Limit = DefaultLimit
	}
	if f.Before < 0 {
		return nil, fmt.Errorf("%w: the cursor must be a positive row id", ErrInvalidFilter)
	}
	// QueryExecModeExec: an unnamed statement is planned with the actual
	// values each time, so the "IS NULL OR" filters fold away.
	rows, err := db.Query(ctx, listSQL, pgx.QueryExecModeExec,
		nullIfEmpty(f.Action), nullIfEmpty(f.Actor), nullIfEmpty(f.Target),
		nullTime(f.Since), nullTime(f.Until), nullIfZero(f.Before), f.Limit, nullIfEmpty(f.Who))
	if err != nil {
		return nil, fmt.Errorf("list audit log: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Record, error) { return scanRecord(r) })
	if err != nil {
		return nil, fmt.Errorf("list audit log: %w", err)
	}
	return out, nil
}

// Anchor is a row's hash recorded outside the database (a ticket, a chat
// message, another system). The chain alone cannot reveal a rewrite of every
// row from some point on, hashes recomputed and head moved, by someone with
// full control of the database; an anchor can.
type Anchor struct {
	ID   int64
	Hash string
}

// ParseAnchor parses "ID:HASH" (the form `idemctl audit verify` prints).
func ParseAnchor(s string) (Anchor, error) {
	idText, hash, ok := strings.Cut(s, ":")
	id, err := strconv.ParseInt(idText, 10, 64)
	if !ok || err != nil || id <= 0 || !strings.HasPrefix(hash, "sha256:") || len(hash) != len("sha256:")+64 {
		return Anchor{}, fmt.Errorf("anchor %q: want ID:sha256:<64 hex> (as audit verify prints it, e.g. 42:sha256:9f86<60 more hex>)", s)
	}
	return Anchor{ID: id, Hash: hash}, nil
}

// String renders the anchor as ParseAnchor reads it.
func (a Anchor) String() string { return fmt.Sprintf("%d:%s", a.ID, a.Hash) }

// Report is the result of Verify.
type Report struct {
	// Rows is the number of rows in the log.
	Rows int64 `json:"rows"`
	// LastID and LastHash are the log's last row (0 and the genesis hash when empty).
	LastID   int64  `json:"last_id"`
	LastHash string `json:"last_hash"`
	// HeadID and HeadHash are what the chain's head records as the last row.
	HeadID   int64  `json:"head_id"`
	HeadHash string `json:"head_hash"`
	// Intact is true when every check passed.
	Intact bool `json:"intact"`
	// BrokenAt is the first broken row (0 when intact) and Problem says why.
	BrokenAt int64  `json:"broken_at,omitempty"`
	Problem  string `json:"problem,omitempty"`
}

// Err is nil when the chain is intact, else an error wrapping ErrChainBroken
// that names the first broken row.
func (r Report) Err() error {
	if r.Intact {
		return nil
	}
	return fmt.Errorf("%w at row %d: %s", ErrChainBroken, r.BrokenAt, r.Problem)
}

// RowHash is the hash of one row, as idem.audit_row_hash defines it:
//
//	hash  = "sha256:" + lowercase hex of SHA-256(bytes)
//	bytes = "idem.audit/v2\n" + field(id) + field(at) + field(actor) + field(person)
//	        + field(db_user) + field(action) + field(target) + field(details) + field(prev_hash)
//	field(s) = decimal byte length of s + ":" + s + "\n"
//
// with id in decimal and at in UTC with microseconds (2026-11-30T21:04:05.123456Z).
func RowHash(r Record) string {
	h := sha256.New()
	h.Write([]byte("idem.audit/v2\n"))
	for _, f := range []string{strconv.FormatInt(r.ID, 10), r.At.UTC().Format("2006-01-02T15:04:05.000000Z"),
		r.Actor, r.Person, r.DBUser, r.Action, r.Target, string(r.Details), r.PrevHash} {
		h.Write([]byte(strconv.Itoa(len(f)) + ":" + f + "\n"))
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// Verify walks the whole chain in Go, from the rows as stored: ids 1..N
// without gaps, each prev_hash equal to the previous row's hash (GenesisHash
// for row 1), each hash recomputed with RowHash, the head equal to the last
// row, and every anchor still present with its hash. It reports the first
// broken row. An error is returned only when the check itself could not run.
// It needs nothing but SELECT on idem.audit and idem.audit_head. On a pool
// or a connection it reads the chain and the head in one REPEATABLE READ,
// READ ONLY transaction (one snapshot: work committed meanwhile is neither
// a row missing nor a row added); in a transaction, in that one's.
func Verify(ctx context.Context, db DBTX, anchors ...Anchor) (Report, error) {
	var r Report
	err := inSnapshot(ctx, db, func(q DBTX) (err error) {
		r, err = verify(ctx, q, anchors)
		return err
	})
	return r, err
}

// txBeginner is a pool or a connection: what can open a transaction with
// options (a pgx.Tx cannot; it is already one).
type txBeginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// inSnapshot runs read in one REPEATABLE READ, READ ONLY transaction opened
// on db, or on db itself when it cannot open one (a pgx.Tx: its snapshot).
func inSnapshot(ctx context.Context, db DBTX, read func(DBTX) error) error {
	b, ok := db.(txBeginner)
	if !ok {
		return read(db)
	}
	tx, err := b.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("verify audit log: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := read(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func verify(ctx context.Context, db DBTX, anchors []Anchor) (Report, error) {
	var r Report
	r.LastHash = GenesisHash
	want := map[int64]string{}
	for _, a := range anchors {
		want[a.ID] = a.Hash
	}
	var unchanged int64 // the last anchored row found unchanged
	rows, err := db.Query(ctx, chainSQL)
	if err != nil {
		return Report{}, fmt.Errorf("verify audit log: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		rec, err := scanRecord(rows)
		if err != nil {
			return Report{}, fmt.Errorf("verify audit log: %w", err)
		}
		if problem := r.next(rec); problem != "" {
			rows.Close()
			r.Intact, r.Problem = false, problem
			return r, nil
		}
		if h, ok := want[rec.ID]; ok && h != rec.Hash {
			rows.Close()
			after := ""
			if unchanged > 0 {
				after = fmt.Sprintf(" after row %d (anchored, unchanged) and", unchanged)
			}
			return r.broken(rec.ID, fmt.Sprintf("its hash %s differs from the anchor %s: rows were rewritten%s at or before this row, and every row from there on re-hashed", rec.Hash, h, after))
		} else if ok {
			unchanged = rec.ID
		}
		delete(want, rec.ID)
	}
	if err := rows.Err(); err != nil {
		return Report{}, fmt.Errorf("verify audit log: %w", err)
	}
	return r.checkHead(ctx, db, want)
}

// next checks one row against the chain so far and takes it in; it returns
// what is wrong, and sets BrokenAt, or "".
func (r *Report) next(rec Record) string {
	switch {
	case rec.ID != r.LastID+1 && rec.ID == r.LastID+2:
		r.BrokenAt = r.LastID + 1
		return fmt.Sprintf("row %d is missing (deleted): row %d follows row %d", r.LastID+1, rec.ID, r.LastID)
	case rec.ID != r.LastID+1:
		r.BrokenAt = r.LastID + 1
		return fmt.Sprintf("rows %d-%d are missing (deleted): row %d follows row %d", r.LastID+1, rec.ID-1, rec.ID, r.LastID)
	case rec.PrevHash != r.LastHash && rec.ID == 1:
		r.BrokenAt = rec.ID
		return "its prev_hash is not the genesis hash: a row was inserted or replaced at the start"
	case rec.PrevHash != r.LastHash:
		r.BrokenAt = rec.ID
		return fmt.Sprintf("its prev_hash is not the hash of row %d: row %d was rewritten, or this row was inserted or replaced", r.LastID, r.LastID)
	case RowHash(rec) != rec.Hash:
		r.BrokenAt = rec.ID
		return "its content does not match its hash: the row was modified"
	}
	r.Rows++
	r.LastID, r.LastHash = rec.ID, rec.Hash
	return ""
}

func (r Report) broken(at int64, why string) (Report, error) {
	r.Intact, r.BrokenAt, r.Problem = false, at, why
	return r, nil
}

// checkHead compares the head with the last row, and reports anchors that
// named rows the log does not have.
func (r Report) checkHead(ctx context.Context, db DBTX, missing map[int64]string) (Report, error) {
	err := db.QueryRow(ctx, "SELECT last_id, last_hash FROM idem.audit_head WHERE singleton").Scan(&r.HeadID, &r.HeadHash)
	if errors.Is(err, pgx.ErrNoRows) {
		return r.broken(r.LastID+1, "the chain's head (idem.audit_head) is missing: it was deleted behind the log's back")
	}
	if err != nil {
		return Report{}, fmt.Errorf("verify audit head: %w", err)
	}
	switch {
	case r.LastID > r.HeadID:
		return r.broken(r.HeadID+1, fmt.Sprintf("row %d was added behind the log's back: the head records row %d as the last", r.HeadID+1, r.HeadID))
	case r.LastID+1 == r.HeadID:
		return r.broken(r.LastID+1, fmt.Sprintf("row %d is missing (deleted from the end of the log): the head records it as the last", r.HeadID))
	case r.LastID < r.HeadID:
		return r.broken(r.LastID+1, fmt.Sprintf("rows %d-%d are missing (deleted from the end of the log): the head records row %d as the last", r.LastID+1, r.HeadID, r.HeadID))
	case r.LastHash != r.HeadHash:
		return r.broken(r.LastID, "its hash differs from the one the head recorded: the last row was rewritten")
	}
	for id := range missing {
		return r.broken(id, "the anchored row is not in the log")
	}
	r.Intact = true
	return r, nil
}

func scanRecord(row pgx.Row) (Record, error) {
	var r Record
	var details string
	if err := row.Scan(&r.ID, &r.At, &r.Actor, &r.Person, &r.DBUser, &r.Action, &r.Target, &details, &r.PrevHash, &r.Hash); err != nil {
		return Record{}, err
	}
	r.Details = json.RawMessage(details)
	return r, nil
}

// logErrors maps the log's SQLSTATEs to this package's errors.
var logErrors = pgerr.Table{Named: true, Codes: map[string]error{
	"IX110": ErrAppendOnly,
	"IX111": ErrInvalidEntry,
	"23514": ErrInvalidEntry,
	"23502": ErrInvalidEntry,
	"IX112": ErrHeadTampered,
	"IX113": ErrReservedAction,
}}

func mapError(err error) error { return logErrors.Map(err) }

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nullIfZero(v int64) any {
	if v == 0 {
		return nil
	}
	return v
}

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}
