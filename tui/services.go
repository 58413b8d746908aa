package tui

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemctl/idemctl/audit"
	"github.com/idemctl/idemctl/internal/term"
	"github.com/idemctl/idemctl/quarantine"
)

// QuarantineService is what the queue view needs from package quarantine.
type QuarantineService interface {
	List(ctx context.Context, f quarantine.Filter) (quarantine.Page, error)
	Show(ctx context.Context, id int64) (quarantine.Record, error)
	Reject(ctx context.Context, id int64, operator, reason string) (quarantine.Record, error)
	AcceptAsNew(ctx context.Context, id int64, newOperationID, operator, reason string) (quarantine.Acceptance, error)
	// PlanAcceptOne plans the accept-as-new of a record of a money class,
	// which another person approves (the Approvals view).
	PlanAcceptOne(ctx context.Context, id int64, newOperationID, operator, reason string) (quarantine.AcceptPlan, error)
	Count(ctx context.Context, f quarantine.Filter) (quarantine.Totals, error)
	Groups(ctx context.Context, o quarantine.GroupOptions) ([]quarantine.Group, error)
	PreviewBulk(ctx context.Context, sel quarantine.Selection) (quarantine.Preview, error)
	RejectBulk(ctx context.Context, sel quarantine.Selection, o quarantine.BulkOptions) (quarantine.BulkResult, error)
}

// AuditService is what the audit view needs from package audit.
type AuditService interface {
	List(ctx context.Context, f audit.Filter) ([]audit.Record, error)
	Verify(ctx context.Context) (audit.Report, error)
}

// Services are the TUI's data sources. Each view talks only to its service,
// and only from inside a tea.Cmd. A nil service makes its view say so.
type Services struct {
	Quarantine QuarantineService
	Audit      AuditService
	Resolve    Stepper
	Horizon    HorizonService
	Reconcile  ReconcileService
	Approvals  ApprovalService
}

// PoolServices returns the services over a connection pool: the same domain
// functions the CLI calls.
func PoolServices(pool *pgxpool.Pool) Services {
	return Services{
		Quarantine: QuarantineDB{Pool: pool},
		Audit:      AuditDB{Pool: pool},
		Resolve:    &ProtocolStepper{Pool: pool},
		Horizon:    HorizonDB{Pool: pool},
		Approvals:  ApprovalsDB{Pool: pool},
	}
}

// QuarantineDB is QuarantineService over package quarantine.
type QuarantineDB struct{ Pool *pgxpool.Pool }

// List lists quarantine records (quarantine.List).
func (q QuarantineDB) List(ctx context.Context, f quarantine.Filter) (quarantine.Page, error) {
	return cleaned(quarantine.List(ctx, q.Pool, f))
}

// Show loads one record's evidence (quarantine.Show).
func (q QuarantineDB) Show(ctx context.Context, id int64) (quarantine.Record, error) {
	return cleaned(quarantine.Show(ctx, q.Pool, id))
}

// Reject records the decision "never run this" (quarantine.Reject).
func (q QuarantineDB) Reject(ctx context.Context, id int64, operator, reason string) (quarantine.Record, error) {
	return cleaned(quarantine.Reject(ctx, q.Pool, id, operator, reason))
}

// AcceptAsNew runs the incoming payload as a new operation (quarantine.AcceptAsNew).
func (q QuarantineDB) AcceptAsNew(ctx context.Context, id int64, newOperationID, operator, reason string) (quarantine.Acceptance, error) {
	return cleaned(quarantine.AcceptAsNew(ctx, q.Pool, id, newOperationID, operator, reason))
}

// PlanAcceptOne plans a money class's accept-as-new (quarantine.PlanAcceptOne).
func (q QuarantineDB) PlanAcceptOne(ctx context.Context, id int64, newOperationID, operator, reason string) (quarantine.AcceptPlan, error) {
	return cleaned(quarantine.PlanAcceptOne(ctx, q.Pool, id, newOperationID, operator, reason))
}

// Count counts what a filter matches (quarantine.Count).
func (q QuarantineDB) Count(ctx context.Context, f quarantine.Filter) (quarantine.Totals, error) {
	return quarantine.Count(ctx, q.Pool, f)
}

// Groups groups the open records (quarantine.Groups).
func (q QuarantineDB) Groups(ctx context.Context, o quarantine.GroupOptions) ([]quarantine.Group, error) {
	return cleaned(quarantine.Groups(ctx, q.Pool, o))
}

// PreviewBulk says what a bulk decision would decide (quarantine.PreviewBulk).
func (q QuarantineDB) PreviewBulk(ctx context.Context, sel quarantine.Selection) (quarantine.Preview, error) {
	return cleaned(quarantine.PreviewBulk(ctx, q.Pool, sel))
}

// RejectBulk rejects a selection in batches (quarantine.RejectBulk).
func (q QuarantineDB) RejectBulk(ctx context.Context, sel quarantine.Selection, o quarantine.BulkOptions) (quarantine.BulkResult, error) {
	return quarantine.RejectBulk(ctx, q.Pool, sel, o)
}

// AuditDB is AuditService over package audit.
type AuditDB struct{ Pool *pgxpool.Pool }

// List lists audit rows newest first (audit.List).
func (a AuditDB) List(ctx context.Context, f audit.Filter) ([]audit.Record, error) {
	return cleaned(audit.List(ctx, a.Pool, f))
}

// Verify walks the whole chain (audit.Verify).
func (a AuditDB) Verify(ctx context.Context) (audit.Report, error) {
	return cleaned(audit.Verify(ctx, a.Pool))
}

// cleaned escapes every string of what a service read (package term) before
// any view shows it: a tenant, a reason or a payload from the database must
// not be able to drive the terminal.
func cleaned[T any](v T, err error) (T, error) {
	term.Clean(&v)
	return v, err
}
