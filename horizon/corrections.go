package horizon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemctl/idemctl/governance"
	"github.com/idemctl/idemctl/idem"
)

// Errors of corrections.
var (
	// ErrInvalidCorrection: a correction without a valid identity or a reason.
	ErrInvalidCorrection = errors.New("invalid correction")
	// ErrCorrectionNotFound: no pending correction with that id.
	ErrCorrectionNotFound = errors.New("no pending correction with that id")
)

// Correction is a manual correction someone may still apply by replaying an
// operation: while pending, it pins its identity (the manual source).
type Correction struct {
	ID        int64      `json:"id"`
	Tenant    string     `json:"tenant"`
	Operation string     `json:"operation_id"`
	Reason    string     `json:"reason"`
	CreatedAt time.Time  `json:"created_at"`
	CreatedBy string     `json:"created_by"`
	DoneAt    *time.Time `json:"done_at,omitempty"`
	DoneBy    string     `json:"done_by,omitempty"`
}

const correctionColumns = "id, tenant_id, operation_id, reason, created_at, created_by, done_at, coalesce(done_by, '')"

func scanCorrection(row pgx.Row) (Correction, error) {
	var c Correction
	err := row.Scan(&c.ID, &c.Tenant, &c.Operation, &c.Reason, &c.CreatedAt, &c.CreatedBy, &c.DoneAt, &c.DoneBy)
	return c, err
}

// AddCorrection records a pending correction (idem.horizon_correction_add,
// which writes the audit row).
func AddCorrection(ctx context.Context, pool *pgxpool.Pool, id idem.Identity, reason, operator string) (Correction, error) {
	if err := id.Validate(); err != nil {
		return Correction{}, fmt.Errorf("%w: %v", ErrInvalidCorrection, err)
	}
	if err := idem.CheckText("a reason", reason, 4096); err != nil {
		return Correction{}, fmt.Errorf("%w: %v", ErrInvalidCorrection, err)
	}
	if err := checkOperator(operator); err != nil {
		return Correction{}, err
	}
	c, err := scanCorrection(pool.QueryRow(ctx, "SELECT "+correctionColumns+" FROM idem.horizon_correction_add($1, $2, $3, $4)",
		id.TenantID, id.OperationID, reason, operator))
	if err != nil {
		return Correction{}, fmt.Errorf("add correction: %w", mapPlanError(err))
	}
	return c, nil
}

// DoneCorrection plans marking a pending correction applied
// (idem.horizon_correction_done): once done it pins nothing, which weakens
// every purge proof made afterwards, so another person's approval
// (governance.ApproveChange) marks it. Returns the planned change;
// ErrCorrectionNotFound when there is no such pending correction.
func DoneCorrection(ctx context.Context, pool *pgxpool.Pool, id int64, operator string) (governance.Change, error) {
	if err := checkOperator(operator); err != nil {
		return governance.Change{}, err
	}
	c, err := governance.DoneCorrection(ctx, pool, id, operator)
	if err != nil {
		return governance.Change{}, mapPlanError(err)
	}
	return c, nil
}

// ListCorrections returns corrections, newest first; pending only unless all.
func ListCorrections(ctx context.Context, q DBTX, all bool) ([]Correction, error) {
	rows, err := q.Query(ctx, "SELECT "+correctionColumns+` FROM idem.horizon_correction
		WHERE $1 OR done_at IS NULL ORDER BY id DESC`, all)
	if err != nil {
		return nil, fmt.Errorf("list corrections: %w", err)
	}
	defer rows.Close()
	out := []Correction{}
	for rows.Next() {
		c, err := scanCorrection(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}
