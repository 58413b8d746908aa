package horizon

import (
	"context"
	"fmt"
	"time"
)

// probeManual enumerates the pending manual corrections (idemctl corrections
// add): each pins its identity until it is marked done.
func probeManual(ctx context.Context, _ Source, env *probeEnv) (observation, error) {
	var n int64
	var oldest *time.Time
	if err := env.pool.QueryRow(ctx, "SELECT pinned, oldest FROM idem.horizon_enum_manual($1)", env.runID).Scan(&n, &oldest); err != nil {
		return observation{}, fmt.Errorf("read pending corrections: %w", err)
	}
	return observation{mode: Enumerating, oldest: oldest, enumerated: n}, nil
}
