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
	//go:embed sql/bulk_accept_plan.sql
	bulkAcceptPlanSQL string
	//go:embed sql/bulk_accept_approve.sql
	bulkAcceptApproveSQL string
	//go:embed sql/bulk_accept_run.sql
	bulkAcceptRunSQL string
	//go:embed sql/bulk_accept_abort.sql
	bulkAcceptAbortSQL string
	//go:embed sql/bulk_accept_show.sql
	bulkAcceptShowSQL string
)

// Bulk accept-as-new errors, mapped from the database's SQLSTATEs.
var (
	// ErrPlanNotFound: no bulk accept-as-new plan with that id (IX120).
	ErrPlanNotFound = errors.New("bulk accept-as-new plan not found")
	// ErrPlanState: the plan is not in a state that allows this (IX121).
	ErrPlanState = errors.New("bulk accept-as-new plan is not in the right state")
	// ErrSamePerson: the planner cannot approve their own plan (IX122).
	ErrSamePerson = errors.New("four-eyes: another person must approve")
	// ErrBadPlan: the rule, the cap or a record of the plan is refused (IX123, IX124).
	ErrBadPlan = errors.New("bulk accept-as-new plan refused")
	// ErrNoPerson: the login maps to no person (IX313).
	ErrNoPerson = errors.New("this login maps to no person")
	// ErrNeedsSecondPerson: accepting a record of a money class as new
	// needs a plan another person approves (IX125); PlanAcceptOne makes it.
	ErrNeedsSecondPerson = errors.New("a money class: another person must approve")
)

// MaxAccept is the most records one bulk accept-as-new plan holds.
const MaxAccept = 10000

// AcceptPlan states.
const (
	PlanPlanned  = "planned"
	PlanApproved = "approved"
	PlanRunning  = "running"
	PlanDone     = "done"
	PlanAborted  = "aborted"
)

// AcceptPlan is a plan to accept many records as new operations: fixed
// records, a rule naming each new operation, a cap, one reason, and a second
// person's approval before anything runs.
type AcceptPlan struct {
	ID        int64           `json:"id"`
	State     string          `json:"state"`
	Rule      string          `json:"rule"`
	Max       int             `json:"max"`
	IDs       []int64         `json:"ids"`
	Reason    string          `json:"reason"`
	Selection json.RawMessage `json:"selection"`
	PlannedAt time.Time       `json:"planned_at"`
	PlannedBy string          `json:"planned_by"`
	// PlannedPerson and ApprovedPerson are the persons behind the logins
	// PlannedDBUser and ApprovedDBUser (four eyes compares persons);
	// PlannedBy and ApprovedBy the --operator labels.
	PlannedPerson  string     `json:"planned_person"`
	PlannedDBUser  string     `json:"planned_db_user"`
	ApprovedAt     *time.Time `json:"approved_at,omitempty"`
	ApprovedBy     string     `json:"approved_by,omitempty"`
	ApprovedPerson string     `json:"approved_person,omitempty"`
	ApprovedDBUser string     `json:"approved_db_user,omitempty"`
	FinishedAt     *time.Time `json:"finished_at,omitempty"`
	AbortReason    string     `json:"abort_reason,omitempty"`
	DoneThrough    int64      `json:"done_through"`
	Accepted       int        `json:"accepted"`
	Skipped        int        `json:"skipped"`
}

// NewOperationID is the id the rule gives a record's operation.
func NewOperationID(rule, operationID string) string {
	return strings.ReplaceAll(rule, "{operation_id}", operationID)
}

// CheckRule checks a revision rule before anything is sent.
func CheckRule(rule string) error {
	if !strings.Contains(rule, "{operation_id}") {
		return fmt.Errorf("%w: the rule %q must contain {operation_id} (e.g. {operation_id}-rev2)", ErrBadPlan, rule)
	}
	if len(rule) > 256 {
		return fmt.Errorf("%w: the rule is longer than 256 bytes", ErrBadPlan)
	}
	return nil
}

// SelectIDs resolves a selection to the ids of its open records up to maxID
// (a preview's; 0 for no bound), at most limit+1, so that a caller can tell
// it is over a cap.
func SelectIDs(ctx context.Context, db idem.DBTX, sel Selection, maxID int64, limit int) ([]int64, error) {
	if sel.IDs != nil {
		return uniqueIDs(sel.IDs), nil
	}
	f := sel.Filter
	f.Status, f.After = StatusOpen, nil
	if !f.Narrowed() {
		return nil, fmt.Errorf("%w: a bulk decision needs a filter (--tenant, --op-prefix, --class, --changed, --group...) or ids on stdin", ErrInvalidFilter)
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return nextBatch(ctx, db, f, maxID, 0, limit+1)
}

// PlanAccept records a plan to accept the selection's open records (up to
// maxID, the preview's; 0 for no bound) as new operations named by rule, at
// most max of them. Nothing runs: another person approves it (ApproveAccept),
// then RunAccept runs it.
func PlanAccept(ctx context.Context, db idem.DBTX, sel Selection, maxID int64, rule string, max int, operator, reason string) (AcceptPlan, error) {
	if err := checkDecision(operator, reason); err != nil {
		return AcceptPlan{}, err
	}
	if err := CheckRule(rule); err != nil {
		return AcceptPlan{}, err
	}
	return planAccept(ctx, db, sel, maxID, rule, max, operator, reason)
}

// PlanAcceptOne plans accepting one record as new operation newOperationID:
// the single accept-as-new of a money class, which another person approves
// (ApproveAccept) before RunAccept runs it.
func PlanAcceptOne(ctx context.Context, db idem.DBTX, id int64, newOperationID, operator, reason string) (AcceptPlan, error) {
	if err := checkDecision(operator, reason); err != nil {
		return AcceptPlan{}, err
	}
	return planAccept(ctx, db, Selection{IDs: []int64{id}}, 0, newOperationID, 1, operator, reason)
}

func planAccept(ctx context.Context, db idem.DBTX, sel Selection, maxID int64, rule string, max int, operator, reason string) (AcceptPlan, error) {
	if max < 1 || max > MaxAccept {
		return AcceptPlan{}, fmt.Errorf("%w: --max must be between 1 and %d", ErrBadPlan, MaxAccept)
	}
	ids, err := SelectIDs(ctx, db, sel, maxID, max)
	if err != nil {
		return AcceptPlan{}, err
	}
	if len(ids) == 0 {
		return AcceptPlan{}, fmt.Errorf("%w: nothing open matches", ErrNothingToDecide)
	}
	if len(ids) > max {
		return AcceptPlan{}, fmt.Errorf("%w: more than %d records match (--max): narrow the selection or raise --max", ErrBadPlan, max)
	}
	desc, _ := json.Marshal(map[string]any{"filter": sel.Filter, "ids_given": sel.IDs != nil})
	p, err := scanPlan(db.QueryRow(ctx, bulkAcceptPlanSQL, ids, rule, max, operator, reason, string(desc)))
	if err != nil {
		return AcceptPlan{}, fmt.Errorf("plan bulk accept-as-new: %w", mapPlanError(err))
	}
	return p, nil
}

// ApproveAccept records the second person's approval.
func ApproveAccept(ctx context.Context, db idem.DBTX, id int64, operator string) (AcceptPlan, error) {
	p, err := scanPlan(db.QueryRow(ctx, bulkAcceptApproveSQL, id, operator))
	if err != nil {
		return AcceptPlan{}, fmt.Errorf("approve bulk accept-as-new plan %d: %w", id, mapPlanError(err))
	}
	return p, nil
}

// AbortAccept stops a plan; what ran stays.
func AbortAccept(ctx context.Context, db idem.DBTX, id int64, operator, reason string) (AcceptPlan, error) {
	p, err := scanPlan(db.QueryRow(ctx, bulkAcceptAbortSQL, id, operator, reason))
	if err != nil {
		return AcceptPlan{}, fmt.Errorf("abort bulk accept-as-new plan %d: %w", id, mapPlanError(err))
	}
	return p, nil
}

// ShowAccept loads a plan.
func ShowAccept(ctx context.Context, db idem.DBTX, id int64) (AcceptPlan, error) {
	p, err := scanPlan(db.QueryRow(ctx, bulkAcceptShowSQL, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return AcceptPlan{}, fmt.Errorf("%w: no plan %d", ErrPlanNotFound, id)
	}
	if err != nil {
		return AcceptPlan{}, fmt.Errorf("load bulk accept-as-new plan %d: %w", id, err)
	}
	return p, nil
}

// RunAccept runs an approved plan in transactions of batch records, each
// record with its own audit row, until it is done or ctx ends (between
// batches: a batch under way commits). It is resumable: a rerun continues
// after the last committed batch.
func RunAccept(ctx context.Context, db idem.TxBeginner, id int64, operator string, batch int, progress func(BulkResult)) (BulkResult, error) {
	if err := idem.CheckText("the operator label (--operator or IDEMCTL_OPERATOR)", operator, 256); err != nil {
		return BulkResult{}, fmt.Errorf("%w: %v", ErrDecisionInput, err)
	}
	if batch == 0 {
		batch = DefaultBatch
	}
	res := BulkResult{Run: fmt.Sprintf("quarantine_bulk_accept:%d", id)}
	for {
		if ctx.Err() != nil {
			res.Interrupted = true
			return res, nil
		}
		n := 0
		// Counted only once the batch commits: a failed batch ran nothing.
		var got BulkResult
		// A batch under way commits even if ctx ends meanwhile.
		bctx := context.WithoutCancel(ctx)
		err := inTx(bctx, db, func(tx pgx.Tx) error {
			rows, err := tx.Query(bctx, bulkAcceptRunSQL, id, operator, batch)
			if err != nil {
				return mapPlanError(err)
			}
			var rid int64
			var outcome string
			var newOp *string
			var auditID *int64
			_, err = pgx.ForEachRow(rows, []any{&rid, &outcome, &newOp, &auditID}, func() error {
				n++
				if strings.HasPrefix(outcome, "already_") {
					got.Skipped++
					return nil
				}
				got.Decided++
				if got.FirstAudit == 0 && auditID != nil {
					got.FirstAudit = *auditID
				}
				if auditID != nil {
					got.LastAudit = *auditID
				}
				return nil
			})
			return mapPlanError(err)
		})
		if err != nil {
			return res, fmt.Errorf("run bulk accept-as-new plan %d (%d accepted before): %w", id, res.Decided, err)
		}
		res.Decided, res.Skipped = res.Decided+got.Decided, res.Skipped+got.Skipped
		if res.FirstAudit == 0 {
			res.FirstAudit = got.FirstAudit
		}
		if got.LastAudit != 0 {
			res.LastAudit = got.LastAudit
		}
		if n == 0 {
			return res, nil
		}
		res.Batches++
		if progress != nil {
			progress(res)
		}
		if n < batch {
			return res, nil
		}
	}
}

func scanPlan(row pgx.Row) (AcceptPlan, error) {
	var p AcceptPlan
	var approvedBy, approvedPerson, approvedDBUser, abortReason *string
	err := row.Scan(&p.ID, &p.State, &p.Rule, &p.Max, &p.IDs, &p.Reason, &p.Selection, &p.PlannedAt, &p.PlannedBy,
		&p.PlannedPerson, &p.PlannedDBUser, &p.ApprovedAt, &approvedBy, &approvedPerson, &approvedDBUser, &p.FinishedAt,
		&abortReason, &p.DoneThrough, &p.Accepted, &p.Skipped)
	p.ApprovedBy, p.ApprovedPerson, p.AbortReason = deref(approvedBy), deref(approvedPerson), deref(abortReason)
	p.ApprovedDBUser = deref(approvedDBUser)
	return p, err
}

// planErrors maps the plan functions' SQLSTATEs, then the decisions'.
var planErrors = pgerr.Table{Codes: map[string]error{
	"IX120": ErrPlanNotFound,
	"IX121": ErrPlanState,
	"IX122": ErrSamePerson,
	"IX123": ErrBadPlan,
	"IX124": ErrBadPlan,
	"IX313": ErrNoPerson,
}}.Merge(decisionErrors)

func mapPlanError(err error) error {
	return planErrors.Map(err)
}
