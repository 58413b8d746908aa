package oncitus_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/migrations"
	"github.com/idemctl/idemctl/recovery"
)

// batch is NDJSON input for resolve: n transfers op-<prefix>-K spread over tenants.
func batch(tenants []string, prefix string, n int, amount func(k int) int) []byte {
	var buf bytes.Buffer
	for k := 0; k < n; k++ {
		line, _ := json.Marshal(map[string]any{
			"tenant": tenants[k%len(tenants)], "operation_id": fmt.Sprintf("%s-%d", prefix, k), "class": "demo.transfer",
			"payload": map[string]any{"from": "alice", "to": "bob", "amount": amount(k), "currency": "EUR"},
		})
		buf.Write(line)
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

func (e *env) resolve(t *testing.T, dryRun bool, input []byte, emit func(recovery.Result)) (recovery.RunSummary, error) {
	t.Helper()
	r := &recovery.Resolver{Pool: e.pool(t, loginOperator, 8), Config: recovery.Config{
		DryRun: dryRun, Operator: "on-call", Concurrency: 4, RetryFor: 3 * time.Second}}
	return r.Run(context.Background(), recovery.NDJSON(bytes.NewReader(input), idem.DefaultMaxPayloadBytes+recovery.LineSlack),
		func(res recovery.Result) error {
			if emit != nil {
				emit(res)
			}
			return nil
		})
}

// TestResolveOnTheCoordinator: resolve's dry run (batched lookups over shards
// on both workers) and real run answer on the coordinator as they do on one
// node: absent identities would apply and then apply once, present ones are
// already applied, another payload is a conflict, quarantined once.
func TestResolveOnTheCoordinator(t *testing.T) {
	e := setup(t)
	super := e.superuser(t)
	tenants := e.spread(t, super, "resolve", 2)
	seeded := batch(tenants, "r", 40, func(k int) int { return 100 + k })
	sum, err := e.resolve(t, false, seeded, nil)
	require.NoError(t, err)
	require.Equal(t, 40, sum.Counts[recovery.Applied], "%v", sum.Counts)

	// 40 applied, 40 new, 1 changed payload.
	input := append(append(append([]byte{}, seeded...), batch(tenants, "new", 40, func(k int) int { return 5 + k })...),
		batch(tenants[:1], "r", 1, func(int) int { return 99999 })...)
	sum, err = e.resolve(t, true, input, nil)
	require.NoError(t, err)
	assert.Equal(t, 40, sum.Counts[recovery.AlreadyApplied], "dry run: %v", sum.Counts)
	assert.Equal(t, 40, sum.Counts[recovery.WouldApply], "dry run: %v", sum.Counts)
	assert.Equal(t, 1, sum.Counts[recovery.WouldConflict], "dry run: %v", sum.Counts)
	assert.Zero(t, count(t, super, "SELECT count(*) FROM idem.identity WHERE operation_id LIKE 'new-%'"), "a dry run wrote nothing")

	sum, err = e.resolve(t, false, input, nil)
	require.NoError(t, err)
	assert.Equal(t, 40, sum.Counts[recovery.AlreadyApplied], "%v", sum.Counts)
	assert.Equal(t, 40, sum.Counts[recovery.Applied], "%v", sum.Counts)
	assert.Equal(t, 1, sum.Counts[recovery.Conflict], "%v", sum.Counts)
	assert.EqualValues(t, 80, count(t, super, `SELECT count(*) FROM demo.posting WHERE tenant_id = ANY($1) AND (operation_id LIKE 'r-%' OR operation_id LIKE 'new-%')`, tenants))
	assert.EqualValues(t, 1, count(t, super, "SELECT count(*) FROM idem.quarantine WHERE tenant_id = $1 AND operation_id = 'r-0'", tenants[0]))
}

// TestResolveWithAWorkerKilledMidBatch: a resolve batch over tenants on both
// workers, one worker killed with SIGKILL mid-batch and restarted: the run
// reports what it could not answer, a rerun converges, and every operation
// has exactly one posting (0 doubled, 0 lost).
func TestResolveWithAWorkerKilledMidBatch(t *testing.T) {
	e := setup(t)
	super := e.superuser(t)
	tenants := e.spread(t, super, "killed", 2)
	const n = 800
	input := batch(tenants, "k", n, func(k int) int { return 1 + k })
	var once sync.Once
	killed := make(chan error, 1)
	answered := 0
	sum, err := e.resolve(t, false, input, func(recovery.Result) {
		answered++
		if answered == 60 {
			once.Do(func() { killed <- e.c.KillWorker(0) })
		}
	})
	require.NoError(t, <-killed)
	t.Logf("first run (worker 0 killed after 60 answers): %v, unknown %d, read %d, err %v", sum.Counts, sum.Unknown, sum.Read, err)
	notAnswered := n - sum.Counts[recovery.Applied] - sum.Counts[recovery.AlreadyApplied]
	assert.Positive(t, notAnswered, "the run answered every operation although a worker was down")
	assert.True(t, sum.Counts[recovery.Failed] > 0 || sum.Unknown > 0 || sum.Interrupted,
		"what the run could not answer is reported (failed, unknown, or an interrupted run): %v", sum.Counts)
	require.NoError(t, e.c.RestartWorker(0))
	waitForCluster(t, super)

	sum, err = e.resolve(t, false, input, nil)
	require.NoError(t, err)
	t.Logf("rerun: %v", sum.Counts)
	assert.Equal(t, n, sum.Counts[recovery.Applied]+sum.Counts[recovery.AlreadyApplied], "the rerun answers everything: %v", sum.Counts)
	assert.EqualValues(t, n, count(t, super, "SELECT count(DISTINCT operation_id) FROM demo.posting WHERE tenant_id = ANY($1) AND operation_id LIKE 'k-%'", tenants), "0 lost")
	assert.EqualValues(t, n, count(t, super, "SELECT count(*) FROM demo.posting WHERE tenant_id = ANY($1) AND operation_id LIKE 'k-%'", tenants), "0 doubled")
}

// waitForCluster waits until a query over every shard succeeds again (the
// coordinator's cached connections to a restarted worker are broken).
func waitForCluster(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	var err error
	for try := 0; try < 50; try++ {
		if _, err = conn.Exec(context.Background(), "SELECT count(*) FROM idem.identity"); err == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("the cluster does not answer after the restart: %v", err)
}

// TestRebalanceWhileResolving: a third worker is added and the shards
// rebalanced onto it (citus_rebalance_start, logical replication) while a
// resolve batch runs over tenants on every worker: once the batch (and, for
// what it could not answer, one rerun) is done, every operation has exactly
// one posting (0 lost, 0 doubled) and the new worker holds shards. It runs
// last: it leaves the cluster with three workers.
func TestRebalanceWhileResolving(t *testing.T) {
	e := setup(t)
	super := e.superuser(t)
	tenants := e.spread(t, super, "rebalanced", 3)
	const n = 1500
	input := batch(tenants, "m", n, func(k int) int { return 1 + k })
	done := make(chan recovery.RunSummary, 1)
	go func() {
		sum, err := e.resolve(t, false, input, nil)
		if err != nil {
			t.Logf("the run during the rebalance ended with: %v", err)
		}
		done <- sum
	}()
	added, err := e.c.AddWorker()
	require.NoError(t, err)
	// The README's step after citus_add_node: migrate again, which creates
	// there what Citus does not carry over.
	_, err = migrations.Apply(context.Background(), super, migrations.Options{})
	require.NoError(t, err)
	assert.EqualValues(t, len(e.c.Workers()), count(t, super,
		"SELECT count(*) FROM run_command_on_workers($$SELECT to_regclass('idem.body_swap_xid') IS NOT NULL$$) WHERE success AND result = 't'"),
		"every worker has idem.body_swap_xid")
	began := time.Now()
	_, err = super.Exec(context.Background(), "SELECT citus_rebalance_start(rebalance_strategy := 'by_shard_count', shard_transfer_mode := 'force_logical')")
	require.NoError(t, err)
	_, err = super.Exec(context.Background(), "SELECT citus_rebalance_wait()")
	require.NoError(t, err)
	t.Logf("rebalance onto %s took %s", added.Name, time.Since(began).Round(time.Millisecond))
	sum := <-done
	t.Logf("run during the rebalance: %v", sum.Counts)
	if got := sum.Counts[recovery.Applied] + sum.Counts[recovery.AlreadyApplied]; got < n {
		sum, err = e.resolve(t, false, input, nil)
		require.NoError(t, err)
		t.Logf("rerun: %v", sum.Counts)
		assert.Equal(t, n, sum.Counts[recovery.Applied]+sum.Counts[recovery.AlreadyApplied], "%v", sum.Counts)
	}
	assert.Positive(t, count(t, super, "SELECT count(*) FROM citus_shards WHERE table_name = 'idem.identity'::regclass AND nodeport = $1", added.Port),
		"%s holds shards of idem.identity", added.Name)
	assert.EqualValues(t, n, count(t, super, "SELECT count(DISTINCT operation_id) FROM demo.posting WHERE tenant_id = ANY($1) AND operation_id LIKE 'm-%'", tenants), "0 lost")
	assert.EqualValues(t, n, count(t, super, "SELECT count(*) FROM demo.posting WHERE tenant_id = ANY($1) AND operation_id LIKE 'm-%'", tenants), "0 doubled")
	assert.EqualValues(t, n, count(t, super, "SELECT count(*) FROM idem.inbox WHERE tenant_id = ANY($1) AND operation_id LIKE 'm-%'", tenants))
}
