package migrations

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// DriftedEffect is a registered class whose SQL effect no longer passes the
// registration's checks: idem.execute refuses to run it (IX016).
type DriftedEffect struct {
	Class   string `json:"class"`
	Effect  string `json:"effect"`
	Problem string `json:"problem"`
}

// String is the line migrate and doctor print.
func (d DriftedEffect) String() string {
	return fmt.Sprintf("class %s: effect %s %s", d.Class, d.Effect, d.Problem)
}

// Querier runs a query (a connection or a pool).
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// DriftedEffects re-checks every registered effect (idem.effect_drift) and
// returns those that drifted since their registration.
func DriftedEffects(ctx context.Context, q Querier) ([]DriftedEffect, error) {
	rows, err := q.Query(ctx, "SELECT op_class, effect, problem FROM idem.effect_drift()")
	if err != nil {
		return nil, fmt.Errorf("re-check the registered effects: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[DriftedEffect])
	if err != nil {
		return nil, fmt.Errorf("re-check the registered effects: %w", err)
	}
	return out, nil
}
