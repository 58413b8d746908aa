package recovery_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/demo"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/recovery"
	"github.com/idemctl/idemctl/redrive"
)

// moments records when things happened, from several goroutines.
type moments struct {
	mu sync.Mutex
	at []time.Time
}

func (m *moments) add() {
	m.mu.Lock()
	m.at = append(m.at, time.Now())
	m.mu.Unlock()
}

// busiestSecond is the most moments any sliding one-second window [t, t+1s)
// holds, and where it starts.
func busiestSecond(at []time.Time) (most int, from time.Time) {
	at = slices.Clone(at)
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	j := 0
	for i := range at {
		for j < len(at) && at[j].Sub(at[i]) < time.Second {
			j++
		}
		if j-i > most {
			most, from = j-i, at[i]
		}
	}
	return most, from
}

// --max-rate is a promise to a busy primary: over a batch that mixes new
// operations, replays (already there) and re-drives through a service, with
// four workers, no sliding one-second window holds more executor calls and
// service requests than the rate plus its documented burst (a tenth).
func TestMaxRateHoldsInEverySlidingSecond(t *testing.T) {
	t.Parallel()
	const rate = 40
	b := setup(t, 8)
	var sent moments
	svc := &demo.Service{Pool: dbtest.PoolAs(t, b.dsn, dbtest.App, 4), Provider: dbtest.PoolAs(t, b.dsn, dbtest.App, 4)}
	h := svc.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			sent.add()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	_, err := redrive.Set(b.ctx, b.pool, demo.AppClass, &redrive.Config{Kind: redrive.KindHTTP, URL: srv.URL + "/transfers"}, true, "alice")
	require.NoError(t, err)

	// 150 replays already applied, 300 new operations, 150 re-drives, shuffled.
	rnd := rand.New(rand.NewPCG(24, 1))
	var lines []string
	for i := range 150 {
		_, err := idem.Execute(b.ctx, b.app, transfer("acme", fmt.Sprint("old-", i), 10+i))
		require.NoError(t, err)
		lines = append(lines, line("acme", fmt.Sprint("old-", i), 10+i))
	}
	for i := range 300 {
		lines = append(lines, line("acme", fmt.Sprint("new-", i), 10+i))
	}
	for i := range 150 {
		lines = append(lines, fmt.Sprintf(`{"tenant":"acme","operation_id":"app-%d","class":%q,"payload":{"from":"a","to":"b","amount":%d,"currency":"EUR"}}`,
			i, demo.AppClass, 10+i))
	}
	rnd.Shuffle(len(lines), func(i, j int) { lines[i], lines[j] = lines[j], lines[i] })

	r := &recovery.Resolver{Pool: b.pool, Config: recovery.Config{Concurrency: 4, MaxRate: rate, Operator: "tester"}}
	recovery.SetAfterSend(r, func(context.Context, *pgx.Conn, idem.Identity) { sent.add() })
	began := time.Now()
	sum, err := r.Run(b.ctx, recovery.NDJSON(strings.NewReader(strings.Join(lines, "\n")), 1<<20), func(recovery.Result) error { return nil })
	require.NoError(t, err)
	took := time.Since(began)
	require.Equal(t, 450, sum.Counts[recovery.Applied], "%v", sum.Counts)
	require.Equal(t, 150, sum.Counts[recovery.AlreadyApplied], "%v", sum.Counts)

	sent.mu.Lock()
	defer sent.mu.Unlock()
	require.GreaterOrEqual(t, len(sent.at), 450, "every new operation and re-drive was seen going out")
	span := slices.MaxFunc(sent.at, func(a, b time.Time) int { return a.Compare(b) }).Sub(slices.MinFunc(sent.at, func(a, b time.Time) int { return a.Compare(b) }))
	require.GreaterOrEqual(t, span, 10*time.Second, "recorded over at least 10 s")
	most, from := busiestSecond(sent.at)
	t.Logf("%d operations out over %s (run %s); busiest second: %d from +%s", len(sent.at), span.Round(time.Millisecond),
		took.Round(time.Millisecond), most, from.Sub(began).Round(time.Millisecond))
	assert.LessOrEqual(t, most, rate+rate/10, "no sliding one-second window over the rate plus its burst")
}

func TestBusiestSecond(t *testing.T) {
	t0 := time.Unix(0, 0)
	at := []time.Time{t0, t0.Add(500 * time.Millisecond), t0.Add(999 * time.Millisecond), t0.Add(time.Second), t0.Add(1100 * time.Millisecond)}
	most, from := busiestSecond(at)
	assert.Equal(t, 4, most, "[0.5 s, 1.5 s) holds four; [0 s, 1 s) three")
	assert.Equal(t, t0.Add(500*time.Millisecond), from)
}
