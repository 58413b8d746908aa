package tui

import (
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemctl/idemctl/tui/approvalsview"
	"github.com/idemctl/idemctl/tui/auditview"
	"github.com/idemctl/idemctl/tui/horizonview"
	"github.com/idemctl/idemctl/tui/queueview"
	"github.com/idemctl/idemctl/tui/reconcileview"
	"github.com/idemctl/idemctl/tui/resolveview"
)

// Services are the TUI's data sources, one a view; each view package
// defines the interface it needs and an adapter over the domain package.
// Each view talks only to its service, and only from inside a tea.Cmd. A nil
// service makes its view say so.
type Services struct {
	Quarantine queueview.QuarantineService
	Audit      auditview.AuditService
	Resolve    resolveview.Stepper
	Horizon    horizonview.HorizonService
	Reconcile  reconcileview.ReconcileService
	Approvals  approvalsview.ApprovalService
}

// ReconcileDB is the reconcile view's service over package reconcile: the
// caller sets the folder of the saved mappings (see PoolServices).
type ReconcileDB = reconcileview.ReconcileDB

// PoolServices returns the services over a connection pool: the same domain
// functions the CLI calls. Reconcile is left unset: it also needs the
// mappings' folder (ReconcileDB).
func PoolServices(pool *pgxpool.Pool) Services {
	return Services{
		Quarantine: queueview.QuarantineDB{Pool: pool},
		Audit:      auditview.AuditDB{Pool: pool},
		Resolve:    &resolveview.ProtocolStepper{Pool: pool},
		Horizon:    horizonview.HorizonDB{Pool: pool},
		Approvals:  approvalsview.ApprovalsDB{Pool: pool},
	}
}
