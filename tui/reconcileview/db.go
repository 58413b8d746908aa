package reconcileview

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/reconcile"
	"github.com/idemctl/idemctl/tui/view"
)

// ReconcileKeep is how many discrepancies and invalid lines a run keeps for
// the view; the counts and amounts always cover every line.
const ReconcileKeep = 1000

// ReconcileService is what the reconcile view needs: the saved mappings, a
// run of one, and a pin of one of its findings.
type ReconcileService interface {
	// Mappings lists the saved mappings.
	Mappings(ctx context.Context) ([]reconcile.SavedMapping, error)
	// Run reconciles a mapping (recorded in the audit log, nothing emitted
	// or pinned) and keeps its first discrepancies.
	Run(ctx context.Context, m reconcile.Mapping, operator string) (ReconcileRun, error)
	// Pin records finding i of run as a pending manual correction and
	// returns the correction's id.
	Pin(ctx context.Context, run *ReconcileRun, i int, operator string) (int64, error)
}

// ReconcileRun is one run as the view shows it.
type ReconcileRun struct {
	// Name is the mapping's.
	Name    string
	Summary reconcile.Summary
	// Findings are the first ReconcileKeep findings that are not matched,
	// escaped for the screen; More is how many more there were.
	Findings []reconcile.Finding
	More     int64
	// raw are the same findings as read: a pin names the real identity,
	// not its escaped rendering.
	raw []reconcile.Finding
}

// ReconcileDB is ReconcileService over package reconcile, with the mapping
// files of Dir.
type ReconcileDB struct {
	Pool *pgxpool.Pool
	Dir  string
}

// Mappings reads the mapping files of Dir (reconcile.ListMappings).
func (r ReconcileDB) Mappings(ctx context.Context) ([]reconcile.SavedMapping, error) {
	if r.Dir == "" {
		return nil, nil
	}
	return view.Cleaned(reconcile.ListMappings(r.Dir))
}

// Run reconciles m (reconcile.Run).
func (r ReconcileDB) Run(ctx context.Context, m reconcile.Mapping, operator string) (ReconcileRun, error) {
	run := ReconcileRun{Name: m.Name}
	sum, err := reconcile.Run(ctx, r.Pool, reconcile.Config{Mapping: m, Operator: operator}, func(f reconcile.Finding) error {
		switch {
		case f.Status == reconcile.Matched:
		case len(run.raw) < ReconcileKeep:
			run.raw = append(run.raw, f)
		default:
			run.More++
		}
		return nil
	})
	run.Summary = sum
	if err != nil && sum.StartedAt.IsZero() {
		return ReconcileRun{}, err
	}
	run.Findings = make([]reconcile.Finding, len(run.raw))
	for i, f := range run.raw {
		// A copy that shares nothing with raw: cleaning escapes in place.
		f.Differences = append([]reconcile.Difference(nil), f.Differences...)
		for j, d := range f.Differences {
			if d.Inbox != nil {
				v := *d.Inbox
				f.Differences[j].Inbox = &v
			}
		}
		run.Findings[i] = f
	}
	return view.Cleaned(run, err)
}

// Pin records a finding as a pending correction (horizon.AddCorrection, with
// reconcile.PinReason).
func (r ReconcileDB) Pin(ctx context.Context, run *ReconcileRun, i int, operator string) (int64, error) {
	if i < 0 || i >= len(run.raw) {
		return 0, fmt.Errorf("no finding %d in this run", i)
	}
	f := run.raw[i]
	c, err := horizon.AddCorrection(ctx, r.Pool, idem.Identity{TenantID: f.Tenant, OperationID: f.OperationID},
		reconcile.PinReason(f, run.Summary.Report), operator)
	return c.ID, err
}
