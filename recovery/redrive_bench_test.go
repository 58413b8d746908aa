package recovery_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemctl/idemctl/demo"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/recovery"
	"github.com/idemctl/idemctl/redrive"
)

// BenchmarkRedrive compares re-driving absent operations through the
// reference service (resolve: the primary check, the lookup, the request,
// the read-back on the primary) with calling the service directly, at the
// same concurrency, over new operations each time, the two alternated in one
// run. Target: re-drive at least 0.8x the direct calls' throughput (x_direct).
//
//	go test ./recovery -run '^$' -bench BenchmarkRedrive -benchtime 2000x
func BenchmarkRedrive(b *testing.B) {
	pool, dsn := dbtest.NewPool(b, 16)
	svc := &demo.Service{Pool: dbtest.PoolAs(b, dsn, dbtest.App, 16), Provider: dbtest.PoolAs(b, dsn, dbtest.App, 16)}
	srv := httptest.NewServer(svc.Handler())
	b.Cleanup(srv.Close)
	ctx := context.Background()
	if _, err := redrive.Set(ctx, pool, demo.AppClass, &redrive.Config{Kind: redrive.KindHTTP, URL: srv.URL + "/transfers",
		Concurrency: 8}, true, "alice"); err != nil {
		b.Fatal(err)
	}
	var seq atomic.Int64
	payload := func(n int64) string {
		return fmt.Sprintf(`{"amount":%d,"currency":"EUR","from":"a%d","to":"b%d"}`, 1+n%1000, n%64, n%64)
	}
	const conns = 8
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns}}
	direct := func(n int) time.Duration {
		var next atomic.Int64
		errs := make(chan error, conns)
		start := time.Now()
		for range conns {
			go func() {
				for next.Add(1) <= int64(n) {
					k := seq.Add(1)
					req, _ := http.NewRequest(http.MethodPost, srv.URL+"/transfers", strings.NewReader(payload(k)))
					req.Header.Set("Idempotency-Key", redrive.IdempotencyKey(fmt.Sprint("direct-", k)))
					req.Header.Set("Idem-Tenant", fmt.Sprint("t", k%64))
					resp, err := client.Do(req)
					if err == nil {
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusOK {
							err = fmt.Errorf("status %d", resp.StatusCode)
						}
					}
					if err != nil {
						errs <- err
						return
					}
				}
				errs <- nil
			}()
		}
		for range conns {
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	redriven := func(n int) time.Duration {
		var lines strings.Builder
		for range n {
			k := seq.Add(1)
			fmt.Fprintf(&lines, `{"tenant":"t%d","operation_id":"rd-%d","class":%q,"payload":%s}`+"\n", k%64, k, demo.AppClass, payload(k))
		}
		r := &recovery.Resolver{Pool: pool, Config: recovery.Config{Concurrency: conns, Operator: "bench"}}
		start := time.Now()
		sum, err := r.Run(ctx, recovery.NDJSON(strings.NewReader(lines.String()), 1<<20), func(recovery.Result) error { return nil })
		if err != nil {
			b.Fatal(err)
		}
		if sum.Counts[recovery.Applied] != n {
			b.Fatalf("applied %d of %d: %v", sum.Counts[recovery.Applied], n, sum.Counts)
		}
		return time.Since(start)
	}
	b.Run(fmt.Sprintf("conns=%d", conns), func(b *testing.B) {
		// Alternated, half of b.N each time, so that drift (a growing ledger,
		// a neighbour's load) falls on both alike.
		half := max(1, b.N/2)
		var d, r time.Duration
		d += direct(half)
		r += redriven(half)
		r += redriven(half)
		d += direct(half)
		rate := func(t time.Duration) float64 { return float64(2*half) / t.Seconds() }
		b.ReportMetric(rate(d), "direct_ops/s")
		b.ReportMetric(rate(r), "redrive_ops/s")
		b.ReportMetric(rate(r)/rate(d), "x_direct")
	})
}
