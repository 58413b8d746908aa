package horizon_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/internal/dbtest"
)

const otherClass = "proj.other"

// replayAnswer is what one replay was told.
type replayAnswer struct {
	outcome  string
	response string
	code     string // the SQLSTATE of an error
}

// claimReplay runs idem.claim for tenant/op with payload {"n":N} in tx, as a
// service replaying it would.
func claimReplay(ctx context.Context, t *testing.T, tx pgx.Tx, class, op string, n int) replayAnswer {
	payload := fmt.Sprintf(`{"n":%d}`, n)
	var a replayAnswer
	var response []byte
	var qid *int64
	err := tx.QueryRow(ctx, "SELECT outcome, response::text, quarantine_id FROM idem.claim($1, $2, $3, $4, $5, NULL)",
		"t1", op, class, payload, mustHash(t, payload)).Scan(&a.outcome, &response, &qid)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		a.code = pgErr.Code
	} else if err != nil {
		a.code = err.Error()
	}
	a.response = string(response)
	return a
}

// TestReplaysSeeThroughPurges races replays, under READ COMMITTED and
// REPEATABLE READ, with purges by swap and by batches of a day that also
// holds rows the purge keeps (another class, a body held by a quarantine
// record). A kept identity must always be answered already_applied with its
// saved response; a purged one already_applied or purged; a snapshot that
// cannot tell may get 40001 (retry), never a wrong answer, never "run it".
// REPEATABLE READ transactions whose snapshot was taken before the purge
// started and that replay after it ended are the deterministic case.
func TestReplaysSeeThroughPurges(t *testing.T) {
	t.Parallel()
	for _, mode := range []struct {
		name      string
		keepRatio float64
	}{{"swap", 0.9}, {"batches", -1}} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			dbtest.RegisterAppClass(t, f.dsn, otherClass, "horizon")
			const n = 300
			f.seed(projClass, "t1", "op-", n, 10*24*time.Hour, time.Minute)
			f.seed(otherClass, "t1", "other-", n, 10*24*time.Hour, time.Minute)
			// op-7 conflicts: its record holds the body, which the purge keeps.
			res, _, err := f.replay("t1", "op-7", `{"n":-7}`)
			require.NoError(t, err)
			require.Equal(t, "conflict", string(res.Outcome))
			p := f.planApproved(f.primaryNow().Add(-24 * time.Hour))

			kept := func(class, op string) bool { return class == otherClass || op == "op-7" }
			var wrong, retries, answers atomic.Int64
			var mu sync.Mutex
			var wrongs []string
			judge := func(class, op string, a replayAnswer, iso string) {
				answers.Add(1)
				bad := ""
				switch {
				case a.code == "40001":
					retries.Add(1)
				case a.code != "":
					bad = "error " + a.code
				case a.outcome == "already_applied" && a.response != `{"ok": true}`:
					bad = "response " + a.response
				case a.outcome == "already_applied":
				case a.outcome == "purged" && !kept(class, op):
				default:
					bad = a.outcome
				}
				if bad != "" {
					wrong.Add(1)
					mu.Lock()
					wrongs = append(wrongs, fmt.Sprintf("%s %s %s: %s", iso, class, op, bad))
					mu.Unlock()
				}
			}
			pick := func(r *rand.Rand) (string, string, int) {
				k := 1 + r.IntN(n)
				if r.IntN(2) == 0 {
					return otherClass, fmt.Sprintf("other-%d", k), k
				}
				return projClass, fmt.Sprintf("op-%d", k), k
			}
			replayIn := func(iso pgx.TxIsoLevel, class, op string, k int, before func(pgx.Tx)) {
				tx, err := f.app.BeginTx(f.ctx, pgx.TxOptions{IsoLevel: iso})
				if err != nil {
					t.Error(err)
					return
				}
				defer tx.Rollback(f.ctx) //nolint:errcheck // a replay writes nothing to keep
				if before != nil {
					before(tx)
				}
				a := claimReplay(f.ctx, t, tx, class, op, k)
				if a.outcome == "claimed" {
					a.outcome = "claimed: it would run again"
				}
				judge(class, op, a, string(iso))
			}

			// Snapshots taken before the purge, replayed after it.
			oldPool := dbtest.PoolAs(t, f.dsn, dbtest.App, 8)
			old := make([]pgx.Tx, 8)
			for i := range old {
				tx, err := oldPool.BeginTx(f.ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
				require.NoError(t, err)
				_, err = tx.Exec(f.ctx, "SELECT 1")
				require.NoError(t, err)
				old[i] = tx
			}

			done := make(chan struct{})
			var wg sync.WaitGroup
			for w := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := rand.New(rand.NewPCG(uint64(w), 7))
					for {
						select {
						case <-done:
							return
						default:
						}
						class, op, k := pick(r)
						if r.IntN(2) == 0 {
							replayIn(pgx.ReadCommitted, class, op, k, nil)
							continue
						}
						// An aged snapshot: taken, then a pause.
						replayIn(pgx.RepeatableRead, class, op, k, func(tx pgx.Tx) {
							_, _ = tx.Exec(f.ctx, "SELECT 1")
							time.Sleep(time.Duration(r.IntN(20)) * time.Millisecond)
						})
					}
				}()
			}
			out, err := horizon.Purge(f.ctx, f.bob, p.ID, horizon.PurgeOptions{Operator: "bob", BatchRows: 20, KeepRatio: mode.keepRatio})
			close(done)
			wg.Wait()
			require.NoError(t, err)
			assert.EqualValues(t, n-1, out.Plan.Purged)
			if mode.keepRatio > 0 {
				require.Positive(t, out.Swaps, "the day was swapped")
			}

			for i, tx := range old {
				class, op := otherClass, fmt.Sprintf("other-%d", i+1)
				switch i % 3 {
				case 1:
					class, op = projClass, "op-7"
				case 2:
					class, op = projClass, fmt.Sprintf("op-%d", 100+i)
				}
				k := i + 1
				if op == "op-7" {
					k = 7
				} else if class == projClass {
					k = 100 + i
				}
				a := claimReplay(f.ctx, t, tx, class, op, k)
				judge(class, op, a, "old snapshot")
				if mode.keepRatio > 0 {
					assert.Equal(t, "40001", a.code, "a snapshot from before the swap cannot answer %s %s: %+v", class, op, a)
				} else {
					assert.Equal(t, "already_applied", a.outcome, "batches delete under MVCC: an old snapshot still sees %s", op)
				}
				_ = tx.Rollback(f.ctx)
			}

			// After the purge, every kept identity is still answered.
			for k := 1; k <= n; k += 37 {
				replayIn(pgx.RepeatableRead, otherClass, fmt.Sprintf("other-%d", k), k, nil)
			}
			replayIn(pgx.ReadCommitted, projClass, "op-7", 7, nil)
			t.Logf("%d answers, %d retries (40001)", answers.Load(), retries.Load())
			assert.Zero(t, wrong.Load(), "wrong answers: %v", wrongs)
		})
	}
}
