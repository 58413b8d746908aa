package recovery_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/recovery"
)

// TestLookupPlanIsAProbePerKey: the batched lookup of a dry run over an
// inbox shaped like a busy service's (100 tenants over 23 day partitions),
// with statistics that over-estimate the identities a key matches, is a
// nested loop of primary-key probes, as a custom plan (what a prepared
// statement's first executions get) and as a generic one, as the operator
// who runs it; and it answers.
func TestLookupPlanIsAProbePerKey(t *testing.T) {
	t.Parallel()
	dsn := dbtest.NewDatabase(t)
	dbtest.ShapedInbox(t, dsn, 100, 50, 23)
	n := 5000
	tenants, ops, classes := make([]string, n), make([]string, n), make([]string, n)
	digests := make([][]byte, n)
	for i := range n {
		g := 1 + i%50
		tenants[i], ops[i], classes[i] = fmt.Sprintf("tenant-%d", 1+i/50), fmt.Sprintf("op-%d", g), "demo.transfer"
		d := sha256.Sum256([]byte(fmt.Sprintf(`{"n":%d}`, g)))
		digests[i] = d[:]
	}
	pool := dbtest.PoolAs(t, dsn, dbtest.Operator, 1)
	conn, err := pool.Acquire(context.Background())
	require.NoError(t, err)
	defer conn.Release()
	ctx := context.Background()
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		tx, err := conn.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, "SET LOCAL plan_cache_mode = "+mode)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, recovery.ProbeOnlySQL)
		require.NoError(t, err)
		dbtest.AssertProbes(t, dbtest.Plan(t, tx, recovery.LookupSQL, tenants, ops, digests, classes, false))
		require.NoError(t, tx.Rollback(ctx))
	}
	var found int
	require.NoError(t, conn.QueryRow(context.Background(), "SELECT count(*) FROM ("+recovery.LookupSQL+") x WHERE stored_hash IS NULL AND NOT purged",
		tenants, ops, digests, classes, false).Scan(&found))
	require.Equal(t, n, found)
}
