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

	"github.com/idemctl/idemctl/demo"
	"github.com/idemctl/idemctl/internal/dbtest"
	recovery "github.com/idemctl/idemctl/recover"
	"github.com/idemctl/idemctl/redrive"
)

// BenchmarkRedrive compares re-driving absent operations through the
// reference service (resolve: the primary check, the lookup, the request,
// the read-back on the primary) with calling the service directly, at the
// same concurrency, over new operations each time. Target: re-drive at least
// 0.8x the direct calls' throughput.
//
//	go test ./recover -run '^$' -bench BenchmarkRedrive -benchtime 2000x
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
	b.Run(fmt.Sprintf("baseline_direct/conns=%d", conns), func(b *testing.B) {
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns}}
		var next atomic.Int64
		errs := make(chan error, conns)
		b.ResetTimer()
		for range conns {
			go func() {
				for next.Add(1) <= int64(b.N) {
					n := seq.Add(1)
					req, _ := http.NewRequest(http.MethodPost, srv.URL+"/transfers", strings.NewReader(payload(n)))
					req.Header.Set("Idempotency-Key", redrive.IdempotencyKey(fmt.Sprint("direct-", n)))
					req.Header.Set("Idem-Tenant", fmt.Sprint("t", n%64))
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
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	})
	b.Run(fmt.Sprintf("redrive/conns=%d", conns), func(b *testing.B) {
		var lines strings.Builder
		for range b.N {
			n := seq.Add(1)
			fmt.Fprintf(&lines, `{"tenant":"t%d","operation_id":"rd-%d","class":%q,"payload":%s}`+"\n", n%64, n, demo.AppClass, payload(n))
		}
		r := &recovery.Resolver{Pool: pool, Config: recovery.Config{Concurrency: conns, Operator: "bench"}}
		b.ResetTimer()
		sum, err := r.Run(ctx, recovery.NDJSON(strings.NewReader(lines.String()), 1<<20), func(recovery.Result) error { return nil })
		if err != nil {
			b.Fatal(err)
		}
		if sum.Counts[recovery.Applied] != b.N {
			b.Fatalf("applied %d of %d: %v", sum.Counts[recovery.Applied], b.N, sum.Counts)
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	})
}
