package recovery_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/recovery"
)

// TestPurgedIdentities: after a proven purge, a dry run and a real run of a
// purged identity answer purged (same payload) or a conflict (another), and
// nothing runs again.
func TestPurgedIdentities(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)
	// A SQL effect that counts its runs, owned and registered as the README
	// says (a definer function of a role with no right on schema idem), and
	// five identities of its class applied ten days ago.
	dbtest.Admin(t, b.dsn, "SET ROLE "+dbtest.EffectRole+"; CREATE TABLE effects.count_runs (t text, o text)")
	dbtest.RegisterEffect(t, b.dsn, "proj.count", "horizon", "count_effect",
		`INSERT INTO effects.count_runs VALUES (t, o) RETURNING jsonb_build_object('ok', true)`)
	dbtest.Seed(t, b.dsn, "proj.count", "t1", "old-", 5, 10*24*time.Hour, time.Hour)
	admin := dbtest.PoolAs(t, b.dsn, dbtest.Superuser, 1) // reads the effect's table
	runs := func() int {
		var n int
		require.NoError(t, admin.QueryRow(b.ctx, "SELECT count(*) FROM effects.count_runs").Scan(&n))
		return n
	}

	// Four eyes: alice plans, bob (another person, another login) approves.
	var now time.Time
	require.NoError(t, b.pool.QueryRow(b.ctx, "SELECT now()").Scan(&now))
	p, err := horizon.MakePlan(b.ctx, b.pool, horizon.PlanOptions{Class: "proj.count", Before: now.Add(-24 * time.Hour), Operator: "alice", AcceptUnbounded: true})
	require.NoError(t, err)
	_, err = horizon.Approve(b.ctx, dbtest.PoolAs(t, b.dsn, dbtest.Operator2, 1), p.ID, "bob")
	require.NoError(t, err)
	r, err := horizon.Purge(b.ctx, b.pool, p.ID, horizon.PurgeOptions{Operator: "alice"})
	require.NoError(t, err)
	require.EqualValues(t, 5, r.Plan.Purged)
	require.Zero(t, b.count(t, "SELECT count(*) FROM idem.inbox WHERE tenant_id = 't1'"), "the bodies are gone")

	lines := func(n int) string {
		return fmt.Sprintf(`{"tenant":"t1","operation_id":"old-1","class":"proj.count","payload":{"n":%d}}`, n)
	}
	input := lines(1) + "\n" + lines(99) + "\n"

	_, dry, err := b.resolve(t, recovery.Config{DryRun: true}, input)
	require.NoError(t, err)
	assert.Equal(t, []recovery.Outcome{recovery.Purged, recovery.WouldConflict}, outcomes(dry))

	_, real, err := b.resolve(t, recovery.Config{}, input)
	require.NoError(t, err)
	assert.Equal(t, []recovery.Outcome{recovery.Purged, recovery.Conflict}, outcomes(real))
	assert.NotZero(t, real[1].QuarantineID)
	assert.Equal(t, 0, runs(), "a purged identity never runs again")
	// Alone in its input (not an identity the input holds twice), both
	// name the stored hash of the purged identity, the same (the real run
	// gave none).
	_, dryOne, err := b.resolve(t, recovery.Config{DryRun: true}, lines(1))
	require.NoError(t, err)
	_, realOne, err := b.resolve(t, recovery.Config{}, lines(1))
	require.NoError(t, err)
	require.Equal(t, []recovery.Outcome{recovery.Purged}, outcomes(realOne))
	assert.Equal(t, dryOne[0].IncomingHash, dryOne[0].StoredHash)
	assert.Equal(t, dryOne[0].StoredHash, realOne[0].StoredHash, "stored_hash of a purged identity: dry run and real run")

	// The counter counts: a new identity of the class runs its effect once.
	_, fresh, err := b.resolve(t, recovery.Config{}, `{"tenant":"t1","operation_id":"new-1","class":"proj.count","payload":{"n":1}}`)
	require.NoError(t, err)
	assert.Equal(t, []recovery.Outcome{recovery.Applied}, outcomes(fresh))
	assert.Equal(t, 1, runs())
}
