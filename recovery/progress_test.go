package recovery_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/recovery"
)

// Progress counts lines as they are answered, not as they are written in
// input order: a slow first line does not hold the count at zero while the
// others are committed.
func TestProgressCountsAnswersAsTheyCome(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)
	var in strings.Builder
	for i := range 60 {
		fmt.Fprintln(&in, line("slow", fmt.Sprint("op-", i), i+1))
	}
	r := &recovery.Resolver{Pool: b.pool, Config: recovery.Config{Concurrency: 3, Operator: "ada"}}
	recovery.SetAfterSend(r, func(_ context.Context, _ *pgx.Conn, id idem.Identity) {
		if id.OperationID == "op-0" {
			time.Sleep(1500 * time.Millisecond)
		}
	})
	var emitted, seenWhileHeld atomic.Int64
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if n, _ := r.Progress(); emitted.Load() == 0 && n > seenWhileHeld.Load() {
				seenWhileHeld.Store(n)
			}
		}
	}()
	_, err := r.Run(b.ctx, recovery.NDJSON(strings.NewReader(in.String()), 1<<20), func(recovery.Result) error {
		emitted.Add(1)
		return nil
	})
	close(done)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, seenWhileHeld.Load(), int64(30), "answers counted while line 1 held the output back")
	n, _ := r.Progress()
	assert.Equal(t, int64(60), n)
}

// While the database does not answer, the run says so (Outage: down, for how
// long, and the retry budget), and stops saying it once it is back.
func TestOutageIsReported(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	proxy, dsn := dbtest.NewProxy(t, b.dsn)
	pool := openPool(t, dsn, 4)
	var in strings.Builder
	for i := range 300 {
		fmt.Fprintln(&in, line("outage", fmt.Sprint("op-", i), i+1))
	}
	r := &recovery.Resolver{Pool: pool, Config: recovery.Config{Concurrency: 3, MaxRate: 300, Operator: "ada", RetryFor: 20 * time.Second}}
	var longest atomic.Int64
	var budget atomic.Int64
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if down, since, retry := r.Outage(); down && int64(since) > longest.Load() {
				longest.Store(int64(since))
				budget.Store(int64(retry))
			}
		}
	}()
	var count int
	restored := make(chan struct{})
	_, err := r.Run(b.ctx, recovery.NDJSON(strings.NewReader(in.String()), 1<<20), func(recovery.Result) error {
		count++
		if count == 50 {
			proxy.Cut()
			time.AfterFunc(2500*time.Millisecond, func() { proxy.Restore(""); close(restored) })
		}
		return nil
	})
	<-restored
	close(stop)
	require.NoError(t, err)
	assert.Greater(t, time.Duration(longest.Load()), time.Second, "the outage was reported while it lasted")
	assert.Equal(t, 20*time.Second, time.Duration(budget.Load()))
	down, _, _ := r.Outage()
	assert.False(t, down, "not down once the database answers again")
}

// A dry run under a rate (--max-rate 100) counts its answers as it gives
// them: the progress line grew with the run, where it read 0 until the
// whole input had waited for its lookup tokens (a 5,000-identity batch).
func TestDryRunProgressGrowsUnderARate(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)
	var in strings.Builder
	for i := range 300 {
		fmt.Fprintln(&in, line("paced", fmt.Sprint("op-", i), i+1))
	}
	r := &recovery.Resolver{Pool: b.pool, Config: recovery.Config{Concurrency: 2, MaxRate: 100, DryRun: true, Operator: "ada"}}
	var samples []int64
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-done:
				return
			case <-time.After(250 * time.Millisecond):
			}
			n, _ := r.Progress()
			samples = append(samples, n)
		}
	}()
	start := time.Now()
	sum, err := r.Run(b.ctx, recovery.NDJSON(strings.NewReader(in.String()), 1<<20), func(recovery.Result) error { return nil })
	close(done)
	<-sampled
	require.NoError(t, err)
	assert.Equal(t, 300, sum.Counts[recovery.WouldApply])
	assert.GreaterOrEqual(t, time.Since(start), 1500*time.Millisecond, "the rate held: 300 lookups at 100/s")
	// Between the start and the end, progress took values strictly between 0
	// and 300, growing.
	var between int
	for i, n := range samples {
		if n > 0 && n < 300 {
			between++
		}
		if i > 0 {
			assert.GreaterOrEqual(t, n, samples[i-1])
		}
	}
	assert.GreaterOrEqual(t, between, 3, "progress samples %v", samples)
}
