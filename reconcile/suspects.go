package reconcile

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemctl/idemctl/internal/pgerr"
)

//go:embed sql/suspects.sql
var suspectsSQL string

// SuspectsQuery says where to look for retries that got a new operation id.
type SuspectsQuery struct {
	// Since is the earliest created_at looked at.
	Since time.Time
	// Classes limits the search (empty: every class but those declared to
	// repeat their payloads, DeclareRepeats); Exclude leaves more classes out.
	Classes []string
	Exclude []string
	// Window is how close in time two identities must be (DefaultSuspectWindow
	// when 0).
	Window time.Duration
}

// DefaultSuspectWindow is how close in time two operations with the same
// payload must be to be suspects.
const DefaultSuspectWindow = 10 * time.Minute

// Suspect is one operation of a group.
type Suspect struct {
	OperationID string    `json:"operation_id"`
	CreatedAt   time.Time `json:"created_at"`
}

// SuspectGroup is a set of operations of one tenant and one class with the
// same canonical payload, each created within the window of the previous
// one: one operation retried under new ids, or a payload that repeats.
type SuspectGroup struct {
	Tenant      string    `json:"tenant"`
	Class       string    `json:"class"`
	PayloadHash string    `json:"payload_hash"`
	Operations  []Suspect `json:"operations"`
}

// FindSuspects lists the groups of operations that differ only in their
// operation id, in tenant, class, payload, time order. It reads idem.identity
// (an operator's or an auditor's login is enough) and writes nothing.
func FindSuspects(ctx context.Context, pool *pgxpool.Pool, q SuspectsQuery) ([]SuspectGroup, error) {
	if q.Window <= 0 {
		q.Window = DefaultSuspectWindow
	}
	var classes []string
	if len(q.Classes) > 0 {
		classes = q.Classes
	}
	exclude := append([]string{}, q.Exclude...)
	rows, err := pool.Query(ctx, suspectsSQL, q.Since, classes, q.Window, exclude)
	if err != nil {
		return nil, fmt.Errorf("suspects: %w", err)
	}
	defer rows.Close()
	var out []SuspectGroup
	var tenant, class, hash, op string
	var created time.Time
	for rows.Next() {
		if err := rows.Scan(&tenant, &class, &hash, &op, &created); err != nil {
			return nil, fmt.Errorf("suspects: %w", err)
		}
		n := len(out)
		if n > 0 {
			g := &out[n-1]
			last := g.Operations[len(g.Operations)-1].CreatedAt
			if g.Tenant == tenant && g.Class == class && g.PayloadHash == hash && created.Sub(last) <= q.Window {
				g.Operations = append(g.Operations, Suspect{OperationID: op, CreatedAt: created})
				continue
			}
		}
		out = append(out, SuspectGroup{Tenant: tenant, Class: class, PayloadHash: hash,
			Operations: []Suspect{{OperationID: op, CreatedAt: created}}})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("suspects: %w", err)
	}
	return out, nil
}

// DeclareRepeats declares whether class's payloads legitimately repeat (a
// projection's tick, a daily total): FindSuspects then leaves the class out
// unless it is named. One operator with a reason, audited
// (idem.class_repeats_set). Returns the declaration before the change.
func DeclareRepeats(ctx context.Context, pool *pgxpool.Pool, class string, repeats bool, operator, reason string) (bool, error) {
	var before bool
	err := pool.QueryRow(ctx, "SELECT idem.class_repeats_set($1, $2, $3, $4)", class, repeats, operator, reason).Scan(&before)
	if err != nil {
		return false, fmt.Errorf("class %s: payloads-repeat: %w", class, declareErrors.Map(err))
	}
	return before, nil
}

// Errors of DeclareRepeats.
var (
	// ErrUnknownClass: no registered class of that name (IX003).
	ErrUnknownClass = errors.New("unknown operation class")
	// ErrRefusedDeclaration: an operator label or a reason is missing or
	// invalid (IX015, IX306).
	ErrRefusedDeclaration = errors.New("refused")
)

var declareErrors = pgerr.Table{Codes: map[string]error{
	"IX003": ErrUnknownClass,
	"IX015": ErrRefusedDeclaration,
	"IX306": ErrRefusedDeclaration,
}}
