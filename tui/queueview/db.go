package queueview

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemctl/idemctl/quarantine"
	"github.com/idemctl/idemctl/tui/view"
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

// QuarantineDB is QuarantineService over package quarantine.
type QuarantineDB struct{ Pool *pgxpool.Pool }

// List lists quarantine records (quarantine.List).
func (q QuarantineDB) List(ctx context.Context, f quarantine.Filter) (quarantine.Page, error) {
	return view.Cleaned(quarantine.List(ctx, q.Pool, f))
}

// Show loads one record's evidence (quarantine.Show).
func (q QuarantineDB) Show(ctx context.Context, id int64) (quarantine.Record, error) {
	return view.Cleaned(quarantine.Show(ctx, q.Pool, id))
}

// Reject records the decision "never run this" (quarantine.Reject).
func (q QuarantineDB) Reject(ctx context.Context, id int64, operator, reason string) (quarantine.Record, error) {
	return view.Cleaned(quarantine.Reject(ctx, q.Pool, id, operator, reason))
}

// AcceptAsNew runs the incoming payload as a new operation (quarantine.AcceptAsNew).
func (q QuarantineDB) AcceptAsNew(ctx context.Context, id int64, newOperationID, operator, reason string) (quarantine.Acceptance, error) {
	return view.Cleaned(quarantine.AcceptAsNew(ctx, q.Pool, id, newOperationID, operator, reason))
}

// PlanAcceptOne plans a money class's accept-as-new (quarantine.PlanAcceptOne).
func (q QuarantineDB) PlanAcceptOne(ctx context.Context, id int64, newOperationID, operator, reason string) (quarantine.AcceptPlan, error) {
	return view.Cleaned(quarantine.PlanAcceptOne(ctx, q.Pool, id, newOperationID, operator, reason))
}

// Count counts what a filter matches (quarantine.Count).
func (q QuarantineDB) Count(ctx context.Context, f quarantine.Filter) (quarantine.Totals, error) {
	return quarantine.Count(ctx, q.Pool, f)
}

// Groups groups the open records (quarantine.Groups).
func (q QuarantineDB) Groups(ctx context.Context, o quarantine.GroupOptions) ([]quarantine.Group, error) {
	return view.Cleaned(quarantine.Groups(ctx, q.Pool, o))
}

// PreviewBulk says what a bulk decision would decide (quarantine.PreviewBulk).
func (q QuarantineDB) PreviewBulk(ctx context.Context, sel quarantine.Selection) (quarantine.Preview, error) {
	return view.Cleaned(quarantine.PreviewBulk(ctx, q.Pool, sel))
}

// RejectBulk rejects a selection in batches (quarantine.RejectBulk).
func (q QuarantineDB) RejectBulk(ctx context.Context, sel quarantine.Selection, o quarantine.BulkOptions) (quarantine.BulkResult, error) {
	return quarantine.RejectBulk(ctx, q.Pool, sel, o)
}
