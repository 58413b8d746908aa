package auditview

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemctl/idemctl/audit"
	"github.com/idemctl/idemctl/tui/view"
)

// AuditService is what the audit view needs from package audit.
type AuditService interface {
	List(ctx context.Context, f audit.Filter) ([]audit.Record, error)
	Verify(ctx context.Context) (audit.Report, error)
}

// AuditDB is AuditService over package audit.
type AuditDB struct{ Pool *pgxpool.Pool }

// List lists audit rows newest first (audit.List).
func (a AuditDB) List(ctx context.Context, f audit.Filter) ([]audit.Record, error) {
	return view.Cleaned(audit.List(ctx, a.Pool, f))
}

// Verify walks the whole chain (audit.Verify).
func (a AuditDB) Verify(ctx context.Context) (audit.Report, error) {
	return view.Cleaned(audit.Verify(ctx, a.Pool))
}
