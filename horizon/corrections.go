package horizon

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemctl/idemctl/audit"
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

// AddCorrection records a pending correction (audited).
func AddCorrection(ctx context.Context, pool *pgxpool.Pool, id idem.Identity, reason, operator string) (Correction, error) {
	if err := id.Validate(); err != nil {
		return Correction{}, fmt.Errorf("%w: %v", ErrInvalidCorrection, err)
	}
	if strings.TrimSpace(reason) == "" || len(reason) > 4096 {
		return Correction{}, fmt.Errorf("%w: a reason (at most 4096 bytes) is required", ErrInvalidCorrection)
	}
	var c Correction
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var err error
		c, err = scanCorrection(tx.QueryRow(ctx, `INSERT INTO idem.horizon_correction (tenant_id, operation_id, reason, created_by)
			VALUES ($1, $2, $3, $4) RETURNING `+correctionColumns, id.TenantID, id.OperationID, reason, operator))
		if err != nil {
			return fmt.Errorf("add correction: %w", err)
		}
		_, err = audit.Append(ctx, tx, audit.Entry{Actor: operator, Action: "horizon.correction.add",
			Target: fmt.Sprintf("correction:%d", c.ID), Details: c})
		return err
	})
	return c, err
}

// DoneCorrection marks a pending correction applied: it no longer pins (audited).
func DoneCorrection(ctx context.Context, pool *pgxpool.Pool, id int64, operator string) (Correction, error) {
	var c Correction
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var err error
		c, err = scanCorrection(tx.QueryRow(ctx, `UPDATE idem.horizon_correction SET done_at = now(), done_by = $2
			WHERE id = $1 AND done_at IS NULL RETURNING `+correctionColumns, id, operator))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: %d", ErrCorrectionNotFound, id)
		}
		if err != nil {
			return fmt.Errorf("finish correction %d: %w", id, err)
		}
		_, err = audit.Append(ctx, tx, audit.Entry{Actor: operator, Action: "horizon.correction.done",
			Target: fmt.Sprintf("correction:%d", c.ID), Details: c})
		return err
	})
	return c, err
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
