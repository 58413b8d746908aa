package horizonview

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// The horizon view names who holds a purge back, with the counts the plan
// recorded: here a quarantine record keeping its evidence.
func TestPlansNameWhoHoldsThePurgeBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, dsn := dbtest.NewPool(t, 2)
	app := dbtest.PoolAs(t, dsn, dbtest.App, 1)
	dbtest.RegisterAppClass(t, dsn, "proj.view", "horizon")
	dbtest.Seed(t, dsn, "proj.view", "t1", "a-", 5, 10*24*time.Hour, time.Second)
	prep, err := idem.Prepare(idem.Command{Identity: idem.Identity{TenantID: "t1", OperationID: "a-2"},
		Class: "proj.view", Payload: []byte(`{"n":99}`)}, idem.PayloadLimits{})
	require.NoError(t, err)
	res, claimed, err := idem.Claim(ctx, app, prep)
	require.NoError(t, err)
	require.False(t, claimed)
	require.Equal(t, idem.Conflict, res.Outcome)
	var now time.Time
	require.NoError(t, pool.QueryRow(ctx, "SELECT now()").Scan(&now))
	plan, err := horizon.MakePlan(ctx, pool, horizon.PlanOptions{Class: "proj.view", Before: now.Add(-24 * time.Hour),
		Operator: "alice", AcceptUnbounded: true})
	require.NoError(t, err)
	require.EqualValues(t, 1, plan.Pinned)

	plans, err := HorizonDB{Pool: pool}.Plans(ctx)
	require.NoError(t, err)
	require.Len(t, plans, 1)
	assert.Equal(t, "1: quarantine 1 (open or rejected records)", plans[0].HeldBack)

	assert.Empty(t, heldBack(horizon.Plan{}), "nothing held back: nothing said")
	assert.Equal(t, "5: quarantine 4 (open or rejected records), manual 1 (pending corrections)",
		heldBack(horizon.Plan{Pinned: 5, PinnedBy: []horizon.PinHolder{{HeldBy: "quarantine", Identities: 4}, {HeldBy: "manual", Identities: 1}}}))
}
