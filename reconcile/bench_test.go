//go:build unix

package reconcile_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/reconcile"
)

// BenchmarkReconcile reconciles a settlement report of N lines (in an order
// unrelated to the identities, as a provider's is) against an inbox of N
// demo.transfer operations, 1 in 1000 of them differing, and reports lines
// per second and the peak Go heap in use during the run (sampled every 5 ms)
// beside the process's peak RSS. Memory bounded means the peak does not grow
// with N: compare 100k with 1M.
//
//	go test ./reconcile -run '^$' -bench BenchmarkReconcile -benchtime 1x
//
// IDEMCTL_BENCH_RECONCILE_CASE=NAME[,NAME...] runs only the cases named (their
// full names below the benchmark's, e.g.
// lines=1000000/sort-buffer=16MiB/stripe-profile).
func BenchmarkReconcile(b *testing.B) {
	type ledger struct {
		pool   *pgxpool.Pool
		report string
	}
	ledgers := map[int]ledger{}
	for _, c := range []struct {
		lines, sortMiB int
		stripe         bool
	}{{100_000, 16, false}, {1_000_000, 4, false}, {1_000_000, 16, false}, {1_000_000, 16, true}, {1_000_000, 64, false}} {
		parent := b
		name := fmt.Sprintf("lines=%d/sort-buffer=%dMiB", c.lines, c.sortMiB)
		if c.stripe {
			// The same operations in a Stripe itemized balance report as
			// downloaded: 19 columns, BOM, CRLF, major units, lower case.
			name += "/stripe-profile"
		}
		if only := os.Getenv("IDEMCTL_BENCH_RECONCILE_CASE"); only != "" && !slices.Contains(strings.Split(only, ","), name) {
			continue // only the cases named, e.g. for a profile
		}
		b.Run(name, func(b *testing.B) {
			l, ok := ledgers[c.lines]
			if !ok {
				// One database per size, shared by its cases: it belongs to
				// the parent benchmark, which drops it at the end.
				dsn := dbtest.As(dbtest.NewDatabase(parent), dbtest.Operator)
				seedTransfers(b, dsn, c.lines)
				l = ledger{pool: dbtest.PoolAs(parent, dsn, dbtest.Operator, 4), report: writeSettlement(b, parent.TempDir(), c.lines)}
				ledgers[c.lines] = l
			}
			cfg := reconcile.Config{Mapping: settlementMapping(l.report), Operator: "alice", TempDir: b.TempDir(),
				ChunkBytes: c.sortMiB << 20}
			if c.stripe {
				cfg.Mapping = reconcile.Mapping{Class: "demo.transfer", Tenant: "acme", Profile: "stripe-balance-itemized",
					Report: writeStripeExport(b, b.TempDir(), c.lines)}
			}
			runtime.GC()
			b.ResetTimer()
			var peak uint64
			cpu0 := cpuTime()
			for i := 0; i < b.N; i++ {
				stop := samplePeakHeap(&peak)
				sum, err := reconcile.Run(context.Background(), l.pool, cfg, func(reconcile.Finding) error { return nil })
				stop()
				if err != nil {
					b.Fatal(err)
				}
				if sum.Report.Lines != int64(c.lines) || sum.Counts[reconcile.Mismatch] != int64(c.lines/1000) {
					b.Fatalf("lines %d, counts %v", sum.Report.Lines, sum.Counts)
				}
			}
			b.StopTimer()
			cpu := (cpuTime() - cpu0).Seconds() / float64(b.N)
			elapsed := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(float64(c.lines)/elapsed, "lines/s")
			// The client's CPU (all its threads, the collector's too) per
			// line: steadier than lines/s on a shared machine, where the wall
			// clock follows the load. The server's CPU is not in it.
			b.ReportMetric(cpu*1e6/float64(c.lines), "client-cpu-µs/line")
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
			b.ReportMetric(float64(peakRSS())/(1<<10), "peak-rss-MiB")
		})
	}
}

// seedTransfers writes n applied demo.transfer operations of tenant acme,
// created now, as the schema owner in one statement: history no API would
// write this fast. The payload is the canonical text of
// {"from","to","amount":I,"currency":"EUR"}.
func seedTransfers(b *testing.B, dsn string, n int) {
	b.Helper()
	if err := dbtest.Owner(dsn, "SELECT idem.inbox_body_ensure(current_date - 1, current_date + 1)"); err != nil {
		b.Fatalf("partitions: %v", err)
	}
	err := dbtest.Owner(dsn, `
		WITH rows AS (
		    SELECT 'op-' || g AS op,
		           '{"amount":' || g || ',"currency":"EUR","from":"acct-a","to":"acct-b"}' AS payload
		    FROM generate_series(1, $1::int) g
		), ident AS (
		    INSERT INTO idem.identity (tenant_id, operation_id, op_class, payload_digest, created_at)
		    SELECT 'acme', op, 'demo.transfer', sha256(convert_to(payload, 'UTF8')), now() FROM rows
		    RETURNING 1
		)
		INSERT INTO idem.inbox_body (tenant_id, operation_id, created_at, op_class, payload, response)
		SELECT 'acme', op, now(), 'demo.transfer', payload, '{"ok":true}' FROM rows`, n)
	if err != nil {
		b.Fatalf("seed %d transfers: %v", n, err)
	}
	for _, sql := range []string{"VACUUM ANALYZE idem.identity", "VACUUM ANALYZE idem.inbox_body"} {
		if err := dbtest.Owner(dsn, sql); err != nil {
			b.Fatalf("%s: %v", sql, err)
		}
	}
}

// writeSettlement writes the report of the seeded transfers: every
// operation once, in a scrambled order, one amount in 1000 changed.
func writeSettlement(b *testing.B, dir string, n int) string {
	return writeScrambled(b, filepath.Join(dir, "settlement.csv"), csvHeader+"\n", n, func(k, amount int) string {
		return "acme,op-" + strconv.Itoa(k) + "," + strconv.Itoa(amount) + ",EUR,settled\n"
	})
}

// writeStripeExport is writeSettlement's report as a Stripe itemized balance
// report: amounts in major units, lower-case currency, BOM and CRLF.
func writeStripeExport(b *testing.B, dir string, n int) string {
	return writeScrambled(b, filepath.Join(dir, "itemized.csv"), "\ufeff"+stripeHeader+"\r\n", n, func(k, amount int) string {
		return stripeRow(k, "charge", "op-"+strconv.Itoa(k), int64(amount), "EUR", "charge") + "\r\n"
	})
}

// writeScrambled writes header, then a line for every operation 1..n in
// an order unrelated to the identities, one amount in 1000 changed.
func writeScrambled(b *testing.B, path, header string, n int, line func(k, amount int) string) string {
	b.Helper()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	w.WriteString(header)
	// i -> i*step mod n visits every operation once when step and n are coprime.
	step := 7919
	for i := 0; i < n; i++ {
		k := (i*step)%n + 1
		amount := k
		if k%1000 == 0 {
			amount++
		}
		w.WriteString(line(k, amount))
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return path
}

// samplePeakHeap records the largest HeapInuse seen until stop is called.
func samplePeakHeap(peak *uint64) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			*peak = max(*peak, ms.HeapInuse)
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// cpuTime is the process's CPU time so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// peakRSS is the process's peak resident set (VmHWM), in KiB; 0 when unknown.
func peakRSS() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}
