package oncitus_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/migrations"
)

// TestPurgeOnTheClusterWithARacingReplay: a horizon purge planned, approved
// (two persons) and run on the coordinator over bodies on both workers, with
// replays of the same identities racing it: nothing runs twice, every replay
// is answered already_applied or purged, and afterwards the tombstones
// answer purged (the executor on the workers, idem.tombstone on the
// coordinator). On Citus the purge deletes by batches, never by a swap.
func TestPurgeOnTheClusterWithARacingReplay(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	super := e.superuser(t)
	const class, n = "proj.citus", 200
	tenants := e.spread(t, super, "purge", 1)
	seedHorizonRows(t, super, class, tenants, n, "12 days", "10 days", "1 minute")
	alice, bob := e.pool(t, loginOperator, 4), e.pool(t, loginOperator2, 4)
	p, err := horizon.MakePlan(ctx, alice, horizon.PlanOptions{Class: class, Before: time.Now().Add(-24 * time.Hour), Operator: "alice", AcceptUnbounded: true})
	require.NoError(t, err)
	assert.EqualValues(t, len(tenants)*n, p.Candidates)
	p, err = horizon.Approve(ctx, bob, p.ID, "bob")
	require.NoError(t, err)

	app := e.pool(t, loginApp, 8)
	var runs atomic.Int64
	outcomes := map[idem.Outcome]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for round := 0; round < 2; round++ {
				for i := 1 + w; i <= n; i += 4 {
					for _, tenant := range tenants {
						res, err := idem.ExecuteFunc(ctx, app, idem.Command{Identity: idem.Identity{TenantID: tenant, OperationID: fmt.Sprintf("op-%d", i)},
							Class: class, Payload: []byte(fmt.Sprintf(`{"n":%d}`, i))},
							func(context.Context, pgx.Tx) (json.RawMessage, error) {
								runs.Add(1)
								return json.RawMessage(`{"ran":true}`), nil
							})
						if err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						outcomes[res.Outcome]++
						mu.Unlock()
					}
				}
			}
		}()
	}
	close(start)
	r, err := horizon.Purge(ctx, bob, p.ID, horizon.PurgeOptions{Operator: "bob", BatchRows: 500})
	wg.Wait()
	require.NoError(t, err)
	t.Logf("purge: %d rows in %d batches, %d swaps; replays: %v", r.Plan.Purged, r.Batches, r.Swaps, outcomes)
	assert.EqualValues(t, len(tenants)*n, r.Plan.Purged)
	assert.Zero(t, r.Swaps, "no swap on Citus")
	assert.Positive(t, r.Batches)
	assert.Zero(t, runs.Load(), "no replay ran its effect again")
	total := 0
	for o, k := range outcomes {
		assert.Contains(t, []idem.Outcome{idem.AlreadyApplied, idem.Purged}, o)
		total += k
	}
	assert.Equal(t, 2*n*len(tenants), total)
	for _, tenant := range tenants {
		res, err := idem.ExecuteFunc(ctx, app, idem.Command{Identity: idem.Identity{TenantID: tenant, OperationID: "op-1"},
			Class: class, Payload: []byte(`{"n":1}`)}, func(context.Context, pgx.Tx) (json.RawMessage, error) {
			return nil, fmt.Errorf("ran again")
		})
		require.NoError(t, err)
		assert.Equal(t, idem.Purged, res.Outcome, "%s", tenant)
		assert.EqualValues(t, n, count(t, super, "SELECT count(*) FROM idem.tombstone WHERE tenant_id = $1 AND purge_plan = $2", tenant, p.ID))
	}
}

// TestMonthPartitionsOnTheCluster: history old enough to get a partition a
// month (idem.inbox_body_ensure) is distributed like a day's, the executor
// on the workers reads its bodies through the generated body reader, and a
// purge of part of it leaves tombstones the workers answer purged while the
// rest answers already_applied.
func TestMonthPartitionsOnTheCluster(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	super := e.superuser(t)
	const class, n = "proj.months", 60
	tenants := e.spread(t, super, "months", 1)
	seedHorizonRows(t, super, class, tenants, n, "200 days", "190 days", "1 day")
	assert.Zero(t, count(t, super, "SELECT count(*) FROM ONLY idem.inbox_body_default"))
	assert.Positive(t, count(t, super, `SELECT count(*) FROM idem.inbox_body_partitions()
		WHERE upper_bound - lower_bound >= interval '28 days'`))
	assert.Positive(t, count(t, super, `SELECT count(*) FROM pg_dist_partition d JOIN idem.inbox_body_partitions() p ON p.part = d.logicalrelid
		WHERE p.upper_bound - p.lower_bound >= interval '28 days'`), "month partitions are distributed")

	alice, bob := e.pool(t, loginOperator, 4), e.pool(t, loginOperator2, 4)
	p, err := horizon.MakePlan(ctx, alice, horizon.PlanOptions{Class: class, Before: time.Now().Add(-160 * 24 * time.Hour), Operator: "alice", AcceptUnbounded: true})
	require.NoError(t, err)
	p, err = horizon.Approve(ctx, bob, p.ID, "bob")
	require.NoError(t, err)
	r, err := horizon.Purge(ctx, bob, p.ID, horizon.PurgeOptions{Operator: "bob"})
	require.NoError(t, err)
	assert.Equal(t, p.Candidates, r.Plan.Purged)
	assert.Positive(t, r.Plan.Purged)

	app := e.pool(t, loginApp, 4)
	for _, c := range []struct {
		op   string
		want idem.Outcome
	}{{"op-2", idem.Purged}, {"op-50", idem.AlreadyApplied}} {
		for _, tenant := range tenants {
			var g int
			_, _ = fmt.Sscanf(c.op, "op-%d", &g)
			res, err := idem.ExecuteFunc(ctx, app, idem.Command{Identity: idem.Identity{TenantID: tenant, OperationID: c.op},
				Class: class, Payload: []byte(fmt.Sprintf(`{"n":%d}`, g))}, func(context.Context, pgx.Tx) (json.RawMessage, error) {
				return nil, fmt.Errorf("ran again")
			})
			require.NoError(t, err)
			assert.Equal(t, c.want, res.Outcome, "%s %s", tenant, c.op)
		}
	}
	var tombs int64
	for _, tenant := range tenants {
		tombs += count(t, super, "SELECT count(*) FROM idem.tombstone WHERE tenant_id = $1 AND purge_plan = $2", tenant, p.ID)
	}
	assert.Equal(t, p.Candidates, tombs)
}

// seedHorizonRows registers class (horizon retention, its effect in Go) and,
// as the schema owner, creates the partitions from since ago to today and
// writes n applied identities op-1..op-n a tenant, payload {"n":g}, created
// age ago plus g times step (history no API would backdate).
func seedHorizonRows(t *testing.T, super *pgx.Conn, class string, tenants []string, n int, since, age, step string) {
	t.Helper()
	ctx := context.Background()
	err := migrations.AsOwner(ctx, super, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT idem.register_class($1, NULL, 'horizon')", class); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "SELECT idem.inbox_body_ensure((now() - $1::interval)::date, now()::date)", since); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `
			WITH rows AS (
			    SELECT t, 'op-' || g AS op, '{"n":' || g || '}' AS payload, now() - $4::interval + g * $5::interval AS at
			    FROM unnest($1::text[]) t, generate_series(1, $2::int) g
			), ident AS (
			    INSERT INTO idem.identity (tenant_id, operation_id, op_class, payload_digest, created_at)
			    SELECT t, op, $3, sha256(convert_to(payload, 'UTF8')), at FROM rows RETURNING 1
			)
			INSERT INTO idem.inbox_body (tenant_id, operation_id, created_at, op_class, payload, response)
			SELECT t, op, at, $3, payload, '{"ok":true}' FROM rows`, tenants, n, class, age, step)
		return err
	})
	require.NoError(t, err)
}
