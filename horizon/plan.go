package horizon

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
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemctl/idemctl/governance"

	"github.com/idemctl/idemctl/idem"
)

//go:embed sql/plan_select.sql
var planSelectSQL string

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

// State is where a plan stands.
type State string

// Plan states.
const (
	StatePlanned  State = "planned"
	StateApproved State = "approved"
	StatePurging  State = "purging"
	StateDone     State = "done"
	StateAborted  State = "aborted"
)

// Actions of a plan.
const (
	ActionPurge          = "purge"
	ActionDropTombstones = "drop_tombstones"
)

// Errors of planning and approval. Database refusals are mapped from their
// SQLSTATEs (IX301-IX305).
var (
	// ErrPlanNotFound: no plan with that id.
	ErrPlanNotFound = errors.New("purge plan not found")
	// ErrPlanState: the plan is not in a state for this step.
	ErrPlanState = errors.New("purge plan not in a state for this step")
	// ErrSameOperator: four-eyes: the person who planned a purge cannot
	// approve it, whatever login or --operator label they use.
	ErrSameOperator = errors.New("four eyes: the person who planned a purge cannot approve it")
	// ErrNoPerson: the login maps to no person (idemctl person add), so it
	// can neither plan, approve nor run a purge.
	ErrNoPerson = errors.New("the database login maps to no person")
	// ErrUnboundedHorizon: no source but the built-in manual one (pending
	// corrections) proves anything: nothing says what the live topics,
	// dead-letter queues and archives could still replay.
	ErrUnboundedHorizon = errors.New("no replay source but the manual one proves the horizon closed")
	// ErrPlanExpired: the plan is past its expiry: its proof is stale.
	ErrPlanExpired = errors.New("the purge plan has expired")
	// ErrEnteredAfterPlan: an entry plan (an import keeps its items'
	// original times) entered identities into the plan's range after the
	// plan counted its candidates: the purge refuses to go on.
	ErrEnteredAfterPlan = errors.New("identities entered the purge range after the plan was made")
	// ErrInsideMargin: the cutoff lies inside the safety margin.
	ErrInsideMargin = errors.New("the cutoff lies inside the safety margin")
	// ErrPurgeRunning: another session is purging this plan, or this session
	// is not its purge's runner.
	ErrPurgeRunning = errors.New("the plan is being purged by another session")
	// ErrInvalidOperator: the --operator label (or a reason) is empty, too
	// long or holds a control character.
	ErrInvalidOperator = errors.New("invalid operator label")
	// ErrSecretInConfig: a source's config holds a secret; secrets are never
	// stored in the database.
	ErrSecretInConfig = errors.New("a replay source's config holds a secret")
	// ErrContractRequired: a forever class is purged only with a business
	// contract reference (--contract).
	ErrContractRequired = errors.New("a forever class is purged only with a business contract reference (--contract)")
	// ErrForeverTombstones: a forever class never drops its tombstones.
	ErrForeverTombstones = errors.New("a forever class never drops its tombstones")
	// ErrNotProven: a source failed or bounds the cutoff; nothing was planned.
	ErrNotProven = errors.New("replay horizon not proven")
)

// ProofError is ErrNotProven with the evidence that refused it.
type ProofError struct {
	Reasons  []string
	Evidence []Evidence
}

func (e *ProofError) Error() string {
	return ErrNotProven.Error() + ": " + strings.Join(e.Reasons, "; ")
}

// Unwrap returns ErrNotProven.
func (e *ProofError) Unwrap() error { return ErrNotProven }

// Plan is a recorded proof and what it allows to purge.
type Plan struct {
	ID        int64     `json:"id"`
	Class     string    `json:"class"`
	Action    string    `json:"action"`
	State     State     `json:"state"`
	Retention Retention `json:"retention"`
	MinAgeSec float64   `json:"min_age_seconds"`
	Contract  string    `json:"contract,omitempty"`
	// Before is what was asked; Cutoff what the plan purges before (Before,
	// or earlier when the class's min-age requires it).
	Before    time.Time `json:"before"`
	Cutoff    time.Time `json:"cutoff"`
	MarginSec float64   `json:"margin_seconds"`
	PlannedAt time.Time `json:"planned_at"`
	PlannedBy string    `json:"planned_by"`
	// PlannedPerson and ApprovedPerson are the persons behind the logins
	// PlannedDBUser and ApprovedDBUser (four-eyes compares persons);
	// PlannedBy and ApprovedBy the --operator labels. Screens show them as
	// audit.Who: "alice (op1)".
	PlannedPerson  string     `json:"planned_person"`
	PlannedDBUser  string     `json:"planned_db_user"`
	ApprovedAt     *time.Time `json:"approved_at,omitempty"`
	ApprovedBy     string     `json:"approved_by,omitempty"`
	ApprovedPerson string     `json:"approved_person,omitempty"`
	ApprovedDBUser string     `json:"approved_db_user,omitempty"`
	// RanPerson and RanDBUser are who last began or resumed the purge
	// (empty: not run yet).
	RanPerson      string     `json:"ran_person,omitempty"`
	RanDBUser      string     `json:"ran_db_user,omitempty"`
	PurgeStartedAt *time.Time `json:"purge_started_at,omitempty"`
	FinishedAt     *time.Time `json:"finished_at,omitempty"`
	AbortedAt      *time.Time `json:"aborted_at,omitempty"`
	AbortedBy      string     `json:"aborted_by,omitempty"`
	AbortReason    string     `json:"abort_reason,omitempty"`
	// Candidates is how many rows (tombstones for drop_tombstones) the plan
	// covers; Pinned how many identities in its range it keeps; Purged how
	// many it removed so far.
	Candidates int64 `json:"candidates"`
	Pinned     int64 `json:"pinned"`
	// PinnedBy says what holds the pinned identities, each counted once
	// (they add up to Pinned): a replay source that enumerated it (the first
	// by name when several did; "manual" for a pending manual correction) or
	// "quarantine" (an open or rejected quarantine record). A source's own
	// pins in the proof count every identity it listed, shared or not.
	PinnedBy []PinHolder `json:"pinned_by"`
	// PinnedWithoutBody counts, of a purge plan's Pinned, the identities
	// with no body left (a tombstone, purged before): Candidates counts
	// bodies, so the bodies the plan keeps are Pinned less these.
	PinnedWithoutBody int64      `json:"pinned_without_body"`
	Purged            int64      `json:"purged"`
	Batches           int        `json:"batches"`
	Proof             []Evidence `json:"proof,omitempty"`
	// ExpiresAt is when the plan can no longer be approved or started (nil:
	// a plan made before plans expired).
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// RemovedSources are the replay sources removed since the class's last
	// finished purge before this plan was made: a proof no longer asks them.
	RemovedSources []governance.Change `json:"removed_sources"`
}

// PinHolder is what holds some of a plan's pinned identities, and how many.
type PinHolder struct {
	// HeldBy is a replay source's name, "manual" (pending manual
	// corrections) or "quarantine" (open or rejected quarantine records).
	HeldBy     string `json:"held_by"`
	Identities int64  `json:"identities"`
}

// Margin returns the plan's safety margin.
func (p Plan) Margin() time.Duration { return time.Duration(p.MarginSec * float64(time.Second)) }

// MinAge returns the class's min-age recorded with the plan.
func (p Plan) MinAge() time.Duration { return time.Duration(p.MinAgeSec * float64(time.Second)) }

func scanPlan(row pgx.Row) (Plan, error) {
	var p Plan
	var state, ret string
	err := row.Scan(&p.ID, &p.Class, &p.Action, &state, &ret, &p.MinAgeSec, &p.Contract, &p.Before, &p.Cutoff, &p.MarginSec,
		&p.PlannedAt, &p.PlannedBy, &p.PlannedPerson, &p.PlannedDBUser,
		&p.ApprovedAt, &p.ApprovedBy, &p.ApprovedPerson, &p.ApprovedDBUser,
		&p.PurgeStartedAt, &p.FinishedAt, &p.AbortedAt, &p.AbortedBy, &p.AbortReason,
		&p.Candidates, &p.Pinned, &p.Purged, &p.Batches, &p.Proof, &p.ExpiresAt, &p.RanPerson, &p.RanDBUser, &p.PinnedBy)
	p.State, p.Retention = State(state), Retention(ret)
	return p, err
}

// GetPlan returns one plan.
func GetPlan(ctx context.Context, q DBTX, id int64) (Plan, error) {
	p, err := scanPlan(q.QueryRow(ctx, planSelectSQL, id, nil, 1))
	if errors.Is(err, pgx.ErrNoRows) {
		return Plan{}, fmt.Errorf("%w: %d", ErrPlanNotFound, id)
	}
	if err != nil {
		return Plan{}, fmt.Errorf("read plan %d: %w", id, err)
	}
	if p.Action == "purge" && p.Pinned > 0 {
		// Distributed identity and body joined on the tenant, the pins (a
		// reference table on Citus) joined to them: no correlated subquery.
		if err := q.QueryRow(ctx, `SELECT count(*) FROM idem.identity i
			JOIN idem.horizon_pin x ON x.tenant_id = i.tenant_id AND x.operation_id = i.operation_id
			LEFT JOIN idem.inbox_body b ON b.tenant_id = i.tenant_id AND b.operation_id = i.operation_id AND b.created_at = i.created_at
			WHERE x.plan_id = $1 AND b.tenant_id IS NULL`, p.ID).Scan(&p.PinnedWithoutBody); err != nil {
			return Plan{}, fmt.Errorf("read plan %d: its pins without a body: %w", id, err)
		}
	}
	var since time.Time
	if err := q.QueryRow(ctx, `SELECT coalesce(max(finished_at), 'epoch') FROM idem.horizon_plan
		WHERE op_class = $1 AND state = 'done' AND id <> $2 AND finished_at < $3`, p.Class, p.ID, p.PlannedAt).Scan(&since); err != nil {
		return Plan{}, fmt.Errorf("read plan %d: the class's last purge: %w", id, err)
	}
	if p.RemovedSources, err = governance.SourcesRemovedSince(ctx, q, since); err != nil {
		return Plan{}, fmt.Errorf("read plan %d: sources removed: %w", id, err)
	}
	return p, nil
}

// ListPlans returns plans, newest first (class "" for all; limit <= 0 for 100).
func ListPlans(ctx context.Context, q DBTX, class string, limit int) ([]Plan, error) {
	if limit <= 0 {
		limit = 100
	}
	var cls any
	if class != "" {
		cls = class
	}
	rows, err := q.Query(ctx, planSelectSQL, nil, cls, limit)
	if err != nil {
		return nil, fmt.Errorf("list plans: %w", err)
	}
	defer rows.Close()
	out := []Plan{}
	for rows.Next() {
		p, err := scanPlan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// PlanOptions is what to plan.
type PlanOptions struct {
	Class string
	// Before is the requested cutoff, on the primary's clock.
	Before time.Time
	// Contract is the business contract reference (required for forever).
	Contract string
	// Margin is the safety margin (0: DefaultMargin).
	Margin time.Duration
	// DropTombstones plans the removal of the class's tombstones (a second
	// proof; horizon classes only).
	DropTombstones bool
	Operator       string
	// ExpiresIn is how long the plan may wait for its approval and its
	// purge's start (0: DefaultPlanExpiry; 1 minute to 30 days).
	ExpiresIn time.Duration
	// AcceptUnbounded lets a plan rest on the manual source alone
	// (--accept-unbounded-horizon): the operator states that nothing else
	// can replay the class.
	AcceptUnbounded bool
}

// DefaultPlanExpiry is how long a plan waits for its approval and its
// purge's start before its proof is taken for stale.
const DefaultPlanExpiry = 7 * 24 * time.Hour

// MakePlan probes every source, and records the proof and the plan: cutoff,
// candidates, pins. It is refused when any source fails or bounds the cutoff
// (ProofError), and when a forever class has no contract.
func MakePlan(ctx context.Context, pool *pgxpool.Pool, o PlanOptions) (Plan, error) {
	if o.Margin == 0 {
		o.Margin = DefaultMargin
	}
	if o.Margin < 0 {
		return Plan{}, fmt.Errorf("%w: the margin must be positive", ErrInvalidPolicy)
	}
	if o.ExpiresIn == 0 {
		o.ExpiresIn = DefaultPlanExpiry
	}
	if err := checkOperator(o.Operator); err != nil {
		return Plan{}, err
	}
	o.Contract = strings.TrimSpace(o.Contract)
	pol, err := GetClass(ctx, pool, o.Class)
	if err != nil {
		return Plan{}, err
	}
	if o.DropTombstones && pol.Retention == Forever {
		return Plan{}, fmt.Errorf("class %s: %w", o.Class, ErrForeverTombstones)
	}
	if pol.Retention == Forever && o.Contract == "" {
		return Plan{}, fmt.Errorf("class %s: %w", o.Class, ErrContractRequired)
	}
	if _, err := EnsurePartitions(ctx, pool); err != nil {
		return Plan{}, err
	}
	sources, err := ListSources(ctx, pool)
	if err != nil {
		return Plan{}, err
	}
	r, err := probeAll(ctx, pool, sources)
	if err != nil {
		return Plan{}, err
	}
	defer r.cleanup(pool)
	cutoff := o.Before
	if floor := r.now.Add(-pol.MinAge); floor.Before(cutoff) {
		cutoff = floor
	}
	if err := r.judge(ctx, pool, o.Class, cutoff, o.Margin); err != nil {
		return Plan{}, err
	}
	if reasons := r.failures(); len(reasons) > 0 {
		return Plan{}, &ProofError{Reasons: reasons, Evidence: r.evidence}
	}
	if r.unbounded() && !o.AcceptUnbounded {
		return Plan{}, fmt.Errorf("class %s: %w: add every source that can replay it (idemctl horizon source add: live topics, dead-letter queues, archives), or pass --accept-unbounded-horizon if nothing else can",
			o.Class, ErrUnboundedHorizon)
	}
	proof, err := json.Marshal(r.evidence)
	if err != nil {
		return Plan{}, err
	}
	var contract any
	if o.Contract != "" {
		contract = o.Contract
	}
	var id int64
	err = pool.QueryRow(ctx, "SELECT id FROM idem.horizon_plan_create($1, $2, $3, make_interval(secs => $4), $5, $6, $7, $8, make_interval(secs => $9))",
		o.Class, o.DropTombstones, o.Before, o.Margin.Seconds(), contract, o.Operator, proof, r.runID, o.ExpiresIn.Seconds()).Scan(&id)
	if err != nil {
		return Plan{}, mapPlanError(err)
	}
	return GetPlan(ctx, pool, id)
}

// Approve records a second person's approval (four-eyes): the database refuses
// the planner's person (ErrSameOperator) and a login that maps to no person
// (ErrNoPerson), whatever --operator says. It writes the audit row itself.
func Approve(ctx context.Context, pool *pgxpool.Pool, id int64, operator string) (Plan, error) {
	if err := checkOperator(operator); err != nil {
		return Plan{}, err
	}
	if _, err := pool.Exec(ctx, "SELECT idem.horizon_approve($1, $2)", id, operator); err != nil {
		return Plan{}, mapPlanError(err)
	}
	return GetPlan(ctx, pool, id)
}

// Cancel aborts a plan that is planned, approved or purging (a purge running
// meanwhile stops at its next batch). The reason is recorded in the plan and
// the audit log.
func Cancel(ctx context.Context, pool *pgxpool.Pool, id int64, operator, reason string) (Plan, error) {
	if err := checkOperator(operator); err != nil {
		return Plan{}, err
	}
	if err := idem.CheckText("a reason (--reason)", reason, 4096); err != nil {
		return Plan{}, fmt.Errorf("%w: %v", ErrInvalidOperator, err)
	}
	if _, err := pool.Exec(ctx, "SELECT idem.horizon_abort($1, $2, $3, NULL)", id, operator, reason); err != nil {
		return Plan{}, mapPlanError(err)
	}
	return GetPlan(ctx, pool, id)
}

// checkOperator applies the database's rule for an --operator label first,
// for a precise error before anything is sent.
func checkOperator(operator string) error {
	if err := idem.CheckText("the operator label (--operator or IDEMCTL_OPERATOR)", operator, 256); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidOperator, err)
	}
	return nil
}

// mapPlanError turns the plan SQLSTATEs into this package's errors.
func mapPlanError(err error) error { return planErrors.Map(err) }

// planErrors maps the horizon functions' SQLSTATEs to this package's errors.
var planErrors = pgerr.Table{Named: true, Codes: map[string]error{
	"IX003": ErrUnknownClass,
	"IX015": ErrInvalidOperator,
	"IX301": ErrPlanNotFound,
	"IX302": ErrPlanState,
	"IX303": ErrSameOperator,
	"IX304": ErrContractRequired,
	"IX306": ErrInvalidPolicy,
	"IX307": ErrInvalidCorrection,
	"IX308": ErrInvalidSource,
	"IX309": ErrCorrectionNotFound,
	"IX310": ErrPurgeRunning,
	"IX311": ErrSecretInConfig,
	"IX313": ErrNoPerson,
	"IX314": ErrInsideMargin,
	"IX315": ErrPlanExpired,
	"IX316": ErrEnteredAfterPlan,
}}

// EnsurePartitions creates the inbox body's daily partitions for today and
// the week ahead (UTC, on the primary's clock). Every horizon command runs
// it; schedule `idemctl horizon maintain` daily so that a day never falls into
// the default partition.
func EnsurePartitions(ctx context.Context, q DBTX) (int, error) {
	var n int
	err := q.QueryRow(ctx, `SELECT idem.inbox_body_ensure((now() AT TIME ZONE 'UTC')::date, (now() AT TIME ZONE 'UTC')::date + 7)`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("create inbox partitions: %w", err)
	}
	return n, nil
}
