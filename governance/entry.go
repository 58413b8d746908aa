package governance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Kinds of entry plan: identities that enter the inbox without their effect.
const (
	// EntryRecord: outcomes known from outside, recorded by hand.
	EntryRecord = "record"
	// EntryImport: an existing idempotency store adopted.
	EntryImport = "import"
)

// EntryItem is one identity of an entry plan: its canonical payload and hash,
// the response in the service's own shape, and the evidence.
type EntryItem struct {
	TenantID    string          `json:"tenant_id"`
	OperationID string          `json:"operation_id"`
	Class       string          `json:"class"`
	Payload     string          `json:"payload"`
	PayloadHash string          `json:"payload_hash"`
	Response    json.RawMessage `json:"response"`
	Evidence    string          `json:"evidence"`
}

// EntryPlan is a four-eyes plan of identities that enter without their effect.
type EntryPlan struct {
	ID             int64           `json:"id"`
	Kind           string          `json:"kind"`
	Source         string          `json:"source"`
	SourceDigest   string          `json:"source_digest"`
	Items          int             `json:"items"`
	Counts         json.RawMessage `json:"counts"`
	Sample         json.RawMessage `json:"sample"`
	Reason         string          `json:"reason"`
	Contract       *string         `json:"contract"`
	Correction     *string         `json:"correction"`
	State          string          `json:"state"`
	PlannedAt      time.Time       `json:"planned_at"`
	PlannedPerson  string          `json:"planned_person"`
	PlannedDBUser  string          `json:"planned_db_user"`
	ApprovedPerson *string         `json:"approved_person"`
	ApprovedDBUser *string         `json:"approved_db_user"`
	Entered        int             `json:"entered"`
	LeftAlone      int             `json:"left_alone"`
	// AbortReason is why an aborted plan was ended (idem.entry_plan_abort).
	AbortReason *string `json:"abort_reason,omitempty"`
	// Cursor is where an import stopped reading its source (--since of
	// the next one); HashFunction the hash function a hash-only store
	// was declared to use.
	Cursor       *string `json:"cursor"`
	HashFunction *string `json:"hash_function"`
	// ItemsDigest is set when an import plan keeps one digest of its items
	// instead of an item a row (idem.import_plan_seal_digest).
	ItemsDigest *string `json:"items_digest,omitempty"`
	// Staged is set when the plan's rows are in its stage in the database
	// (idem.import_plan_seal_stage): its run reads the stage, by chunks.
	Staged bool `json:"staged,omitempty"`
}

// EntryOptions are what a planner states besides the items.
type EntryOptions struct {
	Kind, Source, Operator, Reason string
	// SourceDigest is "sha256:<hex>" of the source; DigestOf computes it.
	SourceDigest string
	// Contract is required for money classes; Correction (who writes the
	// ledger rows) for classes with a SQL effect.
	Contract, Correction string
}

// DigestOf returns the source digest of raw bytes: "sha256:<hex>".
func DigestOf(raw []byte) string {
	sum := sha256.Sum256(raw)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// OneEntry reads the one entry plan a query returns as to_jsonb of its row,
// its errors mapped as MapError maps them.
func OneEntry(rows pgx.Rows, err error) (EntryPlan, error) {
	if err != nil {
		return EntryPlan{}, mapError(err)
	}
	raw, err := pgx.CollectExactlyOneRow(rows, pgx.RowTo[[]byte])
	if err != nil {
		return EntryPlan{}, mapError(err)
	}
	return decodeEntry(raw)
}

// decodeEntry reads an entry plan from to_jsonb of its row.
func decodeEntry(raw []byte) (EntryPlan, error) {
	var p EntryPlan
	if err := json.Unmarshal(raw, &p); err != nil {
		return EntryPlan{}, fmt.Errorf("decode entry plan: %w", err)
	}
	if p.ItemsDigest != nil { // bytea in to_jsonb: \x and hex; plain hex as every digest shown
		d := strings.TrimPrefix(*p.ItemsDigest, `\x`)
		p.ItemsDigest = &d
	}
	return p, nil
}

// PlanEntry plans items entering without their effect (idem.entry_plan_create).
func PlanEntry(ctx context.Context, db DBTX, o EntryOptions, items []EntryItem) (EntryPlan, error) {
	raw, err := json.Marshal(items)
	if err != nil {
		return EntryPlan{}, err
	}
	p, err := OneEntry(db.Query(ctx, `SELECT to_jsonb(p) FROM idem.entry_plan_create($1, $2, $3, $4, $5, $6,
		nullif($7, ''), nullif($8, '')) p`, o.Kind, o.Source, o.SourceDigest, string(raw), o.Operator, o.Reason, o.Contract, o.Correction))
	if err != nil {
		return EntryPlan{}, fmt.Errorf("plan %s: %w", o.Kind, err)
	}
	return p, nil
}

// ApproveEntry is the second person's approval of an entry plan.
func ApproveEntry(ctx context.Context, db DBTX, id int64, operator string) (EntryPlan, error) {
	p, err := OneEntry(db.Query(ctx, "SELECT to_jsonb(p) FROM idem.entry_plan_approve($1, $2) p", id, operator))
	if err != nil {
		return EntryPlan{}, fmt.Errorf("approve entry plan %d: %w", id, err)
	}
	return p, nil
}

// RunEntry enters an approved plan's identities; their effects do not run.
func RunEntry(ctx context.Context, db DBTX, id int64, operator string) (EntryPlan, error) {
	p, err := OneEntry(db.Query(ctx, "SELECT to_jsonb(p) FROM idem.entry_plan_run($1, $2) p", id, operator))
	if err != nil {
		return EntryPlan{}, fmt.Errorf("run entry plan %d: %w", id, err)
	}
	return p, nil
}

// AbortEntry ends an entry plan that will not run (idem.entry_plan_abort):
// staging, planned (rejected or withdrawn) or approved and not started. Any
// person may, with a reason; an import plan's stage is dropped with it. A
// running, done or aborted plan is refused (ErrState).
func AbortEntry(ctx context.Context, db DBTX, id int64, operator, reason string) (EntryPlan, error) {
	p, err := OneEntry(db.Query(ctx, "SELECT to_jsonb(p) FROM idem.entry_plan_abort($1, $2, $3) p", id, operator, reason))
	if err != nil {
		return EntryPlan{}, fmt.Errorf("abort entry plan %d: %w", id, err)
	}
	return p, nil
}

// EntryOutcomes returns each item's outcome after a run, by "tenant/op"
// (an import's run writes none for the items it entered: "entered"; an
// import plan with an items digest has no row for them: the identities it
// entered are read by their mark).
func EntryOutcomes(ctx context.Context, db DBTX, id int64) (map[string]string, error) {
	rows, err := db.Query(ctx, `SELECT e.tenant_id || '/' || e.operation_id,
			coalesce(e.outcome, CASE WHEN p.state = 'done' AND p.kind = 'import' THEN 'entered' ELSE '' END)
		FROM idem.entry_item e JOIN idem.entry_plan p ON p.id = e.plan_id WHERE e.plan_id = $1
		UNION ALL
		SELECT i.tenant_id || '/' || i.operation_id, 'entered'
		FROM idem.identity i JOIN idem.entry_plan p ON p.id = i.entry_plan
		WHERE i.entry_plan = $1 AND p.items_digest IS NOT NULL`, id)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	var k, v string
	_, err = pgx.ForEachRow(rows, []any{&k, &v}, func() error { out[k] = v; return nil })
	return out, err
}

// Origin says how an identity entered the inbox: "executed" (its effect
// ran), or "recorded by hand" / "imported" with the entry plan and the two
// persons. Empty when there is no such identity.
func Origin(ctx context.Context, db DBTX, tenant, operation string) (string, error) {
	var origin string
	err := db.QueryRow(ctx, `SELECT CASE WHEN i.entry_plan IS NULL THEN 'executed'
			ELSE format('%s under entry plan %s: planned by %s (%s), approved by %s (%s)',
			            CASE p.kind WHEN 'import' THEN 'imported' ELSE 'recorded by hand' END, p.id,
			            p.planned_person, p.planned_db_user, p.approved_person, p.approved_db_user) END
		FROM idem.identity i LEFT JOIN idem.entry_plan p ON p.id = i.entry_plan
		WHERE i.tenant_id = $1 AND i.operation_id = $2`, tenant, operation).Scan(&origin)
	if err == pgx.ErrNoRows {
		return "", nil
	}
	return origin, err
}

// KindError says an entry plan is of another kind than the command given
// (record approve of an import plan, import run of a record plan); it is
// ErrState.
type KindError struct {
	ID         int64
	Kind, Step string
}

func (e *KindError) Error() string {
	if e.Kind == EntryImport && e.Step == "run" {
		return fmt.Sprintf("entry plan %d is an import plan: run it with idemctl import run %d (on Citus with its source: --from-ndjson FILE or --from-postgres DSN --query SQL)",
			e.ID, e.ID)
	}
	if e.Kind == EntryImport {
		return fmt.Sprintf("entry plan %d is an import plan: %s it with idemctl import %s %d and its source (--from-ndjson FILE or --from-postgres DSN --query SQL)",
			e.ID, e.Step, e.Step, e.ID)
	}
	return fmt.Sprintf("entry plan %d is a %s plan, not an import: %s it with idemctl record %s %d", e.ID, e.Kind, e.Step, e.Step, e.ID)
}

// Is makes a KindError an ErrState.
func (e *KindError) Is(target error) bool { return target == ErrState }

// CheckEntryKind refuses (a KindError) entry plan id when it is not of kind
// want, for the command step (approve, run); ErrNotFound when there is none.
// The database refuses it too: this says it before anything is read.
func CheckEntryKind(ctx context.Context, db DBTX, id int64, want, step string) error {
	var kind string
	err := db.QueryRow(ctx, "SELECT kind FROM idem.entry_plan WHERE id = $1", id).Scan(&kind)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: no entry plan %d (idemctl record list shows them)", ErrNotFound, id)
	}
	if err != nil {
		return mapError(fmt.Errorf("load entry plan %d: %w", id, err)) // a login that may not read plans is not an operator
	}
	if kind != want {
		return &KindError{ID: id, Kind: kind, Step: step}
	}
	return nil
}

// EntryConflicts counts the items of entry plan id that a run left alone
// because the inbox holds their identity with another request: quarantined
// with both sides, or (an import of a hash-only store) conflict_hash_only.
func EntryConflicts(ctx context.Context, db DBTX, id int64) (int, error) {
	var n int
	err := db.QueryRow(ctx, `SELECT count(*) FROM idem.entry_item
		WHERE plan_id = $1 AND outcome IN ('quarantined', 'conflict_hash_only')`, id).Scan(&n)
	return n, err
}
