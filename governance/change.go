package governance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemctl/idemctl/internal/pgerr"
)

// Errors of governance, mapped from the database's SQLSTATEs.
var (
	// ErrNotFound: no governed change or entry plan with that id (IX330, IX340).
	ErrNotFound = errors.New("not found")
	// ErrState: the change or plan is not in a state that allows this (IX331, IX341).
	ErrState = errors.New("not in the right state")
	// ErrSamePerson: the planner cannot approve their own plan (IX332, IX342).
	ErrSamePerson = errors.New("four-eyes: another person must approve")
	// ErrStale: the target changed since the change was planned (IX333).
	ErrStale = errors.New("the target changed since it was planned")
	// ErrRefused: the input is refused (IX306, IX343).
	ErrRefused = errors.New("refused")
	// ErrNoPerson: the login maps to no person (IX313).
	ErrNoPerson = errors.New("this login maps to no person")
	// ErrUnknownClass: no registered class of that name (IX003).
	ErrUnknownClass = errors.New("unknown operation class")
	// ErrSourceNotFound: no replay source of that name (IX308).
	ErrSourceNotFound = errors.New("no such replay source")
	// ErrInvalidOperator: an unusable --operator label (IX015).
	ErrInvalidOperator = errors.New("invalid operator label")
	// ErrNotOperator: PostgreSQL refused the login a function of schema
	// idem, or the schema or one of its tables (42501, "permission denied
	// for function|schema|table ..."): it is not granted the schema's
	// operator role (a service's or an auditor's login). Another 42501 (a
	// parameter, an owner's act) keeps its own message.
	ErrNotOperator = errors.New("this login is not an operator")
)

var codes = pgerr.Table{Named: true, Codes: map[string]error{
	"IX330": ErrNotFound, "IX340": ErrNotFound,
	"IX331": ErrState, "IX341": ErrState,
	"IX332": ErrSamePerson, "IX342": ErrSamePerson,
	"IX333": ErrStale,
	"IX306": ErrRefused, "IX343": ErrRefused,
	"IX313": ErrNoPerson,
	"IX003": ErrUnknownClass,
	"IX308": ErrSourceNotFound,
	"IX015": ErrInvalidOperator,
}}

var notOperator = pgerr.Table{Named: true, Codes: map[string]error{"42501": ErrNotOperator}}

// mapError maps the database's refusal to its sentinel, keeping the message.
// MapError maps a database error of a four-eyes function to this
// package's sentinels (ErrNotFound, ErrState, ErrSamePerson, ErrRefused).
func MapError(err error) error { return mapError(err) }

func mapError(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42501" {
		if notGranted(pgErr.Message) {
			return notOperator.Map(err)
		}
		return err
	}
	return codes.Map(err)
}

// notGranted tells PostgreSQL's own refusal of an object to a login not
// granted it (the only 42501 an idem call on an operator's path raises
// for a login without the operator role) from any other 42501.
func notGranted(msg string) bool {
	for _, p := range []string{"permission denied for function ", "permission denied for procedure ",
		"permission denied for table ", "permission denied for view "} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return msg == "permission denied for schema idem"
}

// Kinds of governed change.
const (
	KindClassMoney = "class_money"
	// KindSourceRemove removes a replay source.
	KindSourceRemove = "source_remove"
	// KindClassRetention makes a forever class (money) horizon.
	KindClassRetention = "class_retention"
	// KindClassMinAge lowers or removes a class's min-age floor.
	KindClassMinAge = "class_min_age"
	// KindCorrectionDone marks a pending manual correction applied: it no
	// longer pins its identity.
	KindCorrectionDone = "correction_done"
)

// Change is a governed change: one person planned it, another's approval
// applies it.
type Change struct {
	ID             int64           `json:"id"`
	Kind           string          `json:"kind"`
	Target         string          `json:"target"`
	Before         json.RawMessage `json:"before"`
	After          json.RawMessage `json:"after"`
	Reason         string          `json:"reason"`
	State          string          `json:"state"`
	PlannedAt      time.Time       `json:"planned_at"`
	PlannedBy      string          `json:"planned_by"`
	PlannedPerson  string          `json:"planned_person"`
	PlannedDBUser  string          `json:"planned_db_user"`
	ApprovedAt     *time.Time      `json:"approved_at"`
	ApprovedBy     *string         `json:"approved_by"`
	ApprovedPerson *string         `json:"approved_person"`
	ApprovedDBUser *string         `json:"approved_db_user"`
	AbortReason    *string         `json:"abort_reason"`
}

func scanChanges(rows pgx.Rows, err error) ([]Change, error) {
	if err != nil {
		return nil, mapError(err)
	}
	raw, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return nil, mapError(err)
	}
	out := make([]Change, 0, len(raw))
	for _, r := range raw {
		var c Change
		if err := json.Unmarshal(r, &c); err != nil {
			return nil, fmt.Errorf("decode governed change: %w", err)
		}
		out = append(out, c)
	}
	return out, nil
}

func oneChange(rows pgx.Rows, err error) (Change, error) {
	cs, err := scanChanges(rows, err)
	if err != nil {
		return Change{}, err
	}
	if len(cs) == 0 {
		return Change{}, ErrNotFound
	}
	return cs[0], nil
}

// ApproveChange is the second person's approval, which applies the change.
func ApproveChange(ctx context.Context, db DBTX, id int64, operator string) (Change, error) {
	c, err := oneChange(db.Query(ctx, "SELECT to_jsonb(c) FROM idem.governed_change_approve($1, $2) c", id, operator))
	if err != nil {
		return Change{}, fmt.Errorf("approve change %d: %w", id, err)
	}
	return c, nil
}

// AbortChange withdraws a planned change.
func AbortChange(ctx context.Context, db DBTX, id int64, operator, reason string) (Change, error) {
	c, err := oneChange(db.Query(ctx, "SELECT to_jsonb(c) FROM idem.governed_change_abort($1, $2, $3) c", id, operator, reason))
	if err != nil {
		return Change{}, fmt.Errorf("abort change %d: %w", id, err)
	}
	return c, nil
}

// GetChange returns one governed change.
func GetChange(ctx context.Context, db DBTX, id int64) (Change, error) {
	c, err := oneChange(db.Query(ctx, "SELECT to_jsonb(c) FROM idem.governed_change c WHERE id = $1", id))
	if err != nil {
		return Change{}, fmt.Errorf("change %d: %w", id, err)
	}
	return c, nil
}

// ListChanges returns governed changes, newest first; only the planned
// ones unless all.
func ListChanges(ctx context.Context, db DBTX, all bool) ([]Change, error) {
	return scanChanges(db.Query(ctx, `SELECT to_jsonb(c) FROM idem.governed_change c
		WHERE $1 OR state = 'planned' ORDER BY id DESC`, all))
}

// SourcesRemovedSince returns the replay sources removed (approved removals)
// after since; the zero time means ever.
func SourcesRemovedSince(ctx context.Context, db DBTX, since time.Time) ([]Change, error) {
	return scanChanges(db.Query(ctx, `SELECT to_jsonb(c) FROM idem.governed_change c
		WHERE kind = 'source_remove' AND state = 'approved' AND approved_at > $1 ORDER BY approved_at, id`, since))
}

// RemoveSource plans removing replay source name (idem.horizon_source_remove):
// a second person's approval removes it.
func RemoveSource(ctx context.Context, db DBTX, name, operator, reason string) (Change, error) {
	c, err := oneChange(db.Query(ctx, "SELECT to_jsonb(c) FROM idem.horizon_source_remove($1, $2, $3) c", name, operator, reason))
	if err != nil {
		return Change{}, fmt.Errorf("remove source %s: %w", name, err)
	}
	return c, nil
}

// DoneCorrection plans marking pending manual correction id applied
// (idem.horizon_correction_done): it would no longer pin its identity, so
// another person's approval (ApproveChange) marks it. Returns the planned
// change. An unknown or done correction is the database's IX309, left for
// the caller to map.
func DoneCorrection(ctx context.Context, db DBTX, id int64, operator string) (Change, error) {
	c, err := oneChange(db.Query(ctx, "SELECT to_jsonb(c) FROM idem.horizon_correction_done($1, $2) c", id, operator))
	if err != nil {
		return Change{}, fmt.Errorf("finish correction %d: %w", id, err)
	}
	return c, nil
}
