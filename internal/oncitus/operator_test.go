package oncitus_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/audit"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/quarantine"
)

// TestQuarantineDecisionsOnTheCoordinator: conflicts recorded on the workers
// (with ids from the workers' ranges, 2^48 and up) are listed, shown and
// decided by an operator on the coordinator: a rejection and an acceptance
// as a new operation (which runs the effect on the tenant's node), each
// with its audit row in the one chain, which still verifies.
func TestQuarantineDecisionsOnTheCoordinator(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	app := e.conn(t, loginApp)
	op := e.pool(t, loginOperator, 4)
	var ids []int64
	tenants := e.spread(t, e.superuser(t), "decide", 1)
	for _, tenant := range tenants {
		_, err := idem.Execute(ctx, app, transfer(tenant, "op", 10))
		require.NoError(t, err)
		res, err := idem.Execute(ctx, app, transfer(tenant, "op", 11))
		require.NoError(t, err)
		require.Equal(t, idem.Conflict, res.Outcome)
		assert.GreaterOrEqual(t, res.QuarantineID, int64(1)<<48, "an id minted on a worker")
		ids = append(ids, res.QuarantineID)
	}
	for i, tenant := range tenants {
		page, err := quarantine.List(ctx, op, quarantine.Filter{Status: quarantine.StatusOpen, Tenant: tenant})
		require.NoError(t, err)
		require.Len(t, page.Items, 1)
		assert.Equal(t, ids[i], page.Items[0].ID)
		rec, err := quarantine.Show(ctx, op, ids[i])
		require.NoError(t, err)
		assert.Equal(t, tenant, rec.Tenant)
		assert.NotEmpty(t, rec.Diff)
	}
	rec, err := quarantine.Reject(ctx, op, ids[0], "on-call", "the client sent a changed amount")
	require.NoError(t, err)
	assert.Equal(t, quarantine.StatusRejected, rec.Status)
	require.NotNil(t, rec.Decision)
	acc, err := quarantine.AcceptAsNew(ctx, op, ids[1], "op-corrected", "on-call", "the second amount is the right one")
	require.NoError(t, err)
	assert.Equal(t, idem.Applied, acc.Outcome)
	assert.EqualValues(t, 1, count(t, e.superuser(t), "SELECT count(*) FROM demo.posting WHERE tenant_id = $1 AND operation_id = 'op-corrected'", tenants[1]))
	_, err = quarantine.Reject(ctx, op, ids[0], "on-call", "again")
	assert.ErrorIs(t, err, quarantine.ErrAlreadyDecided, "a decision is final")

	rep, err := audit.Verify(ctx, e.conn(t, loginAuditor))
	require.NoError(t, err)
	require.NoError(t, rep.Err())
	assert.EqualValues(t, 1, count(t, e.superuser(t), "SELECT count(*) FROM idem.audit WHERE action = 'quarantine.reject' AND target = 'quarantine:' || $1::bigint", ids[0]))
}
