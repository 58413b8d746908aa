package oncitus_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/migrations"
)

// A purge plan on the cluster counts its pins without a body (the
// identity, its body and the pins joined on the coordinator): a conflict on
// a tombstone pins an identity that keeps no body, and candidates plus the
// pins that keep one are the bodies in range.
func TestPurgePlanPinsWithoutABodyOnTheCluster(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	super := e.superuser(t)
	const class, n = "proj.pins", 3
	tenants := e.spread(t, super, "pins", 1)
	seedHorizonRows(t, super, class, tenants, n, "12 days", "10 days", "1 minute")
	require.NoError(t, migrations.AsOwner(ctx, super, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "DELETE FROM idem.inbox_body WHERE tenant_id = $1 AND operation_id = 'op-1'", tenants[0])
		return err
	}))
	app := e.pool(t, loginApp, 2)
	for _, op := range []string{"op-1", "op-2"} {
		res, err := idem.ExecuteFunc(ctx, app, idem.Command{Identity: idem.Identity{TenantID: tenants[0], OperationID: op},
			Class: class, Payload: []byte(`{"n":"other"}`)}, func(context.Context, pgx.Tx) (json.RawMessage, error) { return json.RawMessage(`{}`), nil })
		require.NoError(t, err)
		require.Equal(t, idem.Conflict, res.Outcome, op)
	}
	alice := e.pool(t, loginOperator, 2)
	p, err := horizon.MakePlan(ctx, alice, horizon.PlanOptions{Class: class, Before: time.Now().Add(-24 * time.Hour), Operator: "alice", AcceptUnbounded: true})
	require.NoError(t, err)
	assert.EqualValues(t, 2, p.Pinned)
	assert.EqualValues(t, 1, p.PinnedWithoutBody)
	assert.EqualValues(t, len(tenants)*n-1, p.Candidates+p.Pinned-p.PinnedWithoutBody, "the bodies in range")
}
