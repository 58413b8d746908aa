package recovery_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/db"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/recovery"
)

// withAppName returns dsn with another application_name, so that a test can
// pick the resolver's connections out of pg_stat_activity.
func withAppName(t *testing.T, dsn, name string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	q := u.Query()
	q.Set("application_name", name)
	u.RawQuery = q.Encode()
	return u.String()
}

// openPool opens a pool on dsn, closed when t ends.
func openPool(t *testing.T, dsn string, maxConns int32) *pgxpool.Pool {
	t.Helper()
	pool, err := db.Open(context.Background(), dsn, db.Options{MaxConns: maxConns})
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// collect runs r over input and returns the summary, the results and the error.
func collect(ctx context.Context, r *recovery.Resolver, input string) (recovery.RunSummary, []recovery.Result, error) {
	var mu sync.Mutex
	var out []recovery.Result
	sum, err := r.Run(ctx, recovery.NDJSON(strings.NewReader(input), idem.DefaultMaxPayloadBytes+recovery.LineSlack), func(res recovery.Result) error {
		mu.Lock()
		defer mu.Unlock()
		out = append(out, res)
		return nil
	})
	return sum, out, err
}

// inboxOf returns the saved responses of a tenant's identities, by operation_id.
func (b bundle) inboxOf(t *testing.T, tenant string) map[string]string {
	t.Helper()
	rows, err := b.pool.Query(b.ctx, "SELECT operation_id, response::text FROM idem.inbox WHERE tenant_id = $1", tenant)
	require.NoError(t, err)
	out := map[string]string{}
	for rows.Next() {
		var op string
		var resp *string
		require.NoError(t, rows.Scan(&op, &resp))
		out[op] = ""
		if resp != nil {
			out[op] = *resp
		}
	}
	require.NoError(t, rows.Err())
	return out
}

// assertMatchesDatabase checks every reported outcome against the database:
// an identity has an inbox row exactly when its line was reported applied or
// already_applied, with the saved response reported; nothing was reported
// failed for a connection that broke.
func assertMatchesDatabase(t *testing.T, b bundle, tenant string, res []recovery.Result) {
	t.Helper()
	inbox := b.inboxOf(t, tenant)
	reported := map[string]bool{}
	for _, r := range res {
		reported[r.OperationID] = true
		stored, exists := inbox[r.OperationID]
		switch r.Outcome {
		case recovery.Applied, recovery.AlreadyApplied:
			if assert.True(t, exists, "line %d reported %s but has no inbox row", r.Line, r.Outcome) {
				assert.JSONEq(t, stored, string(r.Response), "line %d: the saved response", r.Line)
			}
		default:
			assert.False(t, exists, "line %d reported %s (%v) but its identity is in the inbox", r.Line, r.Outcome, r.Err)
		}
		if r.Outcome == recovery.Failed {
			assert.NotContains(t, r.Err.Error(), "57P01", "line %d: a terminated connection is not a failed effect", r.Line)
		}
	}
	postings := b.count(t, "SELECT count(*) FROM demo.posting WHERE operation_id IN (SELECT operation_id FROM idem.inbox WHERE tenant_id = $1)", tenant)
	assert.Equal(t, len(inbox), postings, "one posting per inbox row")
}

// Connections killed all through a run (pg_terminate_backend in a loop, what
// a DBA or a failover does): no line is reported "error" for it, and every
// reported outcome is what the database holds (a COMMIT that succeeded is
// never reported as a failure; a lost one is settled again).
func TestConnectionsKilledMidRun(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	victim := withAppName(t, b.dsn, "idemctl-victim")
	pool := openPool(t, victim, 5)
	const n = 2500
	var in strings.Builder
	for i := range n {
		fmt.Fprintln(&in, line("kill", fmt.Sprint("op-", i), i+1))
	}

	killer, err := pgx.Connect(b.ctx, withAppName(t, b.dsn, "idemctl-killer"))
	require.NoError(t, err)
	defer killer.Close(context.Background())
	var kills atomic.Int64
	stop := make(chan struct{})
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) {
			select {
			case <-stop:
				return
			case <-time.After(15 * time.Millisecond):
			}
			var k int64
			if err := killer.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))
				FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'idemctl-victim'`).Scan(&k); err == nil {
				kills.Add(k)
			}
		}
	}()
	r := &recovery.Resolver{Pool: pool, Config: recovery.Config{Concurrency: 4, Operator: "ada"}}
	sum, res, err := collect(b.ctx, r, in.String())
	close(stop)
	<-killed
	require.NoError(t, err)
	require.Positive(t, kills.Load(), "the test killed connections")
	t.Logf("%d backends terminated; %v", kills.Load(), sum.Counts)
	require.Len(t, res, n)
	assertMatchesDatabase(t, b, "kill", res)
	assert.Zero(t, sum.Counts[recovery.Failed], "a killed connection is retried, never reported as an error")
	assert.Equal(t, n, sum.Counts[recovery.Applied]+sum.Counts[recovery.AlreadyApplied])
	assert.Equal(t, n, len(b.inboxOf(t, "kill")))
}

// A failover or a network cut of a second and a half in the middle of a run:
// the operations caught in it wait and go through when the database is back;
// none is reported "error".
func TestShortOutageIsRetried(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	proxy, dsn := dbtest.NewProxy(t, b.dsn)
	pool := openPool(t, dsn, 4)
	const n = 600
	var in strings.Builder
	for i := range n {
		fmt.Fprintln(&in, line("outage", fmt.Sprint("op-", i), i+1))
	}
	var res []recovery.Result
	for _, dry := range []bool{true, false} {
		res = nil
		r := &recovery.Resolver{Pool: pool, Config: recovery.Config{Concurrency: 3, MaxRate: 600, DryRun: dry, BatchSize: 20, Operator: "ada"}}
		var once sync.Once
		restored := make(chan struct{})
		sum, err := r.Run(b.ctx, recovery.NDJSON(strings.NewReader(in.String()), 1<<20), func(x recovery.Result) error {
			res = append(res, x)
			if len(res) == 100 {
				once.Do(func() {
					proxy.Cut()
					time.AfterFunc(1500*time.Millisecond, func() { proxy.Restore(""); close(restored) })
				})
			}
			return nil
		})
		<-restored
		require.NoError(t, err, "dry run %v", dry)
		require.Len(t, res, n)
		assert.Zero(t, sum.Counts[recovery.Failed], "dry run %v: %v", dry, sum.Counts)
		if dry {
			assert.Equal(t, recovery.Counts{recovery.WouldApply: n}, sum.Counts)
			continue
		}
		// An operation whose COMMIT went through just before the cut, its
		// acknowledgement lost, is settled again: already applied.
		assert.Equal(t, n, sum.Counts[recovery.Applied]+sum.Counts[recovery.AlreadyApplied], "%v", sum.Counts)
		for _, r := range res {
			if r.Outcome == recovery.AlreadyApplied {
				assert.Contains(t, r.Note, "lost", "line %d", r.Line)
			}
		}
	}
	assertMatchesDatabase(t, b, "outage", res)
	assert.Equal(t, n, len(b.inboxOf(t, "outage")))
}

// The connection breaks at the worst instant, between sending an operation's
// pipeline (BEGIN ... COMMIT) and reading its results:
//   - after the server committed (the acknowledgement is lost): the operation
//     is settled again and reported already_applied with its saved response,
//     never "error, nothing written";
//   - while the server was still waiting (a first attempt held the identity)
//     and the backend is terminated (57P01): nothing committed, so the
//     operation is run again and applied once.
func TestLostAcknowledgement(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)
	pool := openPool(t, b.dsn, 3)

	t.Run("committed", func(t *testing.T) {
		r := &recovery.Resolver{Pool: pool, Config: recovery.Config{Concurrency: 2, Operator: "ada"}}
		var mu sync.Mutex
		broken := map[string]bool{}
		recovery.SetAfterSend(r, func(ctx context.Context, conn *pgx.Conn, id idem.Identity) {
			mu.Lock()
			again := broken[id.OperationID]
			broken[id.OperationID] = true
			mu.Unlock()
			if !strings.HasSuffix(id.OperationID, "-lost") || again {
				return
			}
			require.Eventually(t, func() bool {
				return b.count(t, "SELECT count(*) FROM idem.inbox WHERE tenant_id = $1 AND operation_id = $2", id.TenantID, id.OperationID) == 1
			}, 10*time.Second, 5*time.Millisecond, "the server commits what was sent")
			conn.PgConn().Conn().Close() // the acknowledgement never arrives
		})
		input := line("ack", "a-1", 1) + "\n" + line("ack", "a-2-lost", 2) + "\n" + line("ack", "a-3", 3) + "\n" + line("ack", "a-4-lost", 4) + "\n"
		sum, res, err := collect(b.ctx, r, input)
		require.NoError(t, err)
		assert.Equal(t, []recovery.Outcome{recovery.Applied, recovery.AlreadyApplied, recovery.Applied, recovery.AlreadyApplied}, outcomes(res))
		for _, i := range []int{1, 3} {
			assert.Contains(t, res[i].Note, "lost", "line %d", res[i].Line)
			assert.Contains(t, string(res[i].Response), "posting_id", "the saved response of the attempt that committed")
		}
		assert.Zero(t, sum.Counts[recovery.Failed])
		assertMatchesDatabase(t, b, "ack", res)
		assert.Equal(t, 4, b.count(t, "SELECT count(*) FROM demo.posting WHERE operation_id LIKE 'a-%'"))
	})

	t.Run("terminated before commit", func(t *testing.T) {
		first, err := b.app.Begin(b.ctx) // the service's attempt
		require.NoError(t, err)
		defer first.Rollback(context.Background())
		_, err = idem.Execute(b.ctx, first, transfer("ack", "b-1", 1))
		require.NoError(t, err)

		r := &recovery.Resolver{Pool: pool, Config: recovery.Config{Operator: "ada"}}
		var once sync.Once
		recovery.SetAfterSend(r, func(ctx context.Context, conn *pgx.Conn, id idem.Identity) {
			once.Do(func() {
				pid := conn.PgConn().PID()
				require.Eventually(t, func() bool {
					return b.count(t, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'", pid) == 1
				}, 10*time.Second, 5*time.Millisecond, "resolve waits on the first attempt")
				var ok bool
				require.NoError(t, b.pool.QueryRow(b.ctx, "SELECT pg_terminate_backend($1)", pid).Scan(&ok))
				require.True(t, ok)
				require.NoError(t, first.Rollback(b.ctx)) // the first attempt dies too
			})
		})
		sum, res, err := collect(b.ctx, r, line("ack", "b-1", 1))
		require.NoError(t, err)
		require.Len(t, res, 1)
		assert.Equal(t, recovery.Applied, res[0].Outcome, "%v", res[0].Err)
		assert.Contains(t, res[0].Note, "lost")
		assert.Equal(t, recovery.Counts{recovery.Applied: 1}, sum.Counts)
		assertMatchesDatabase(t, b, "ack", res)
		assert.Equal(t, 1, b.count(t, "SELECT count(*) FROM demo.posting WHERE operation_id = 'b-1'"))
	})
}

// The database goes away and stays away: the run stops once RetryFor has
// passed (no line is reported "error"), what was reported is what the
// database holds, and nothing after LastLine was attempted. When it comes
// back read-only instead (a standby, a demoted primary), the run stops as
// refused.
func TestOutageStopsRun(t *testing.T) {
	t.Parallel()
	for _, comeback := range []string{"never", "read-only"} {
		t.Run(comeback, func(t *testing.T) {
			t.Parallel()
			b := setup(t, 2)
			proxy, dsn := dbtest.NewProxy(t, b.dsn)
			pool := openPool(t, dsn, 4)
			const n = 600
			var in strings.Builder
			for i := range n {
				fmt.Fprintln(&in, line("gone", fmt.Sprint("op-", i), i+1))
			}
			var records []recovery.RunSummary
			r := &recovery.Resolver{Pool: pool, Config: recovery.Config{Concurrency: 3, MaxRate: 600, Operator: "ada", RetryFor: 1500 * time.Millisecond,
				Window:    200, // read at most 200 lines ahead of the answers
				RecordRun: func(_ context.Context, s recovery.RunSummary) error { records = append(records, s); return nil }}}
			var res []recovery.Result
			var cutAt time.Time
			sum, err := r.Run(b.ctx, recovery.NDJSON(strings.NewReader(in.String()), 1<<20), func(x recovery.Result) error {
				res = append(res, x)
				if len(res) == 100 {
					proxy.Cut()
					cutAt = time.Now()
					if comeback == "read-only" {
						// What a demotion does; an operator may not, so the
						// test server's superuser does it.
						readOnlyFromNowOn(t, b)
						time.AfterFunc(300*time.Millisecond, func() { proxy.Restore("") })
					}
				}
				return nil
			})
			stopped := time.Since(cutAt)
			if comeback == "never" {
				require.ErrorIs(t, err, recovery.ErrUnreachable)
				var ue *recovery.UnreachableError
				require.ErrorAs(t, err, &ue)
				assert.Contains(t, err.Error(), "database unreachable for")
				assert.Less(t, stopped, 8*time.Second, "the run stops once RetryFor has passed")
				assert.GreaterOrEqual(t, stopped, time.Second)
			} else {
				require.ErrorIs(t, err, recovery.ErrNotPrimary)
			}
			assert.True(t, sum.Interrupted)
			assert.Less(t, sum.LastLine, n)
			assert.Zero(t, sum.Counts[recovery.Failed], "%v", sum.Counts)
			assert.Equal(t, len(res), sum.Counts.Total())
			for _, x := range res {
				assert.Equal(t, recovery.Applied, x.Outcome, "line %d: %v", x.Line, x.Err)
			}
			// The reported ones are in the database; in flight at the cut,
			// some may be too (their outcome unknown, not reported); nothing
			// after LastLine is.
			inbox := b.inboxOf(t, "gone")
			for _, x := range res {
				assert.Contains(t, inbox, x.OperationID)
			}
			for op := range inbox {
				var i int
				_, err := fmt.Sscanf(op, "op-%d", &i)
				require.NoError(t, err)
				assert.LessOrEqual(t, i+1, sum.LastLine, "nothing after the last line read was attempted")
			}
			assert.GreaterOrEqual(t, len(inbox), len(res))
			require.Len(t, records, 1)
			assert.Equal(t, sum.Counts, records[0].Counts)
		})
	}
}
