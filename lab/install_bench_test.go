//go:build unix

package lab

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/idemctl/idemctl/internal/dbtest"
)

// BenchmarkInstall measures what a design's scratch schema costs to install:
// server_ms is the backend's CPU (from /proc/<pid>/schedstat, which the load
// of other work on the machine barely moves), client_ms the lab's own CPU
// time for the install (qualifying the SQL), wall_ms the time it took.
//
//	go test ./lab -run '^$' -bench BenchmarkInstall -benchtime 5x
func BenchmarkInstall(b *testing.B) {
	dsn := dbtest.NewDatabase(b)
	ctx := context.Background()
	conn := connect(b, dsn)
	var pid uint32
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		b.Fatal(err)
	}
	if schedCPU(pid) == 0 {
		b.Skip("no /proc/<pid>/schedstat of the server's backend (a server elsewhere)")
	}
	for _, d := range []string{"atomic", "marker_separate_tx"} {
		b.Run(d, func(b *testing.B) {
			dd, err := designByName(d)
			if err != nil {
				b.Fatal(err)
			}
			var server, client time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				schema := schemaName(fmt.Sprintf("b%07d", i), d)
				if err := createSchema(ctx, conn, schema, currentOwner("bench", time.Now())); err != nil {
					b.Fatal(err)
				}
				s0, c0 := schedCPU(pid), processCPU()
				r := &runner{}
				if err := r.install(ctx, conn, &designState{d: dd, schema: schema}, NewWorkload(1, 30)); err != nil {
					b.Fatal(err)
				}
				server += schedCPU(pid) - s0
				client += processCPU() - c0
				b.StopTimer()
				if err := dropSchemas(conn, []string{schema}); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(server.Microseconds())/1000/float64(b.N), "server_ms")
			b.ReportMetric(float64(client.Microseconds())/1000/float64(b.N), "client_ms")
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "wall_ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// schedCPU is the time a process has run on a CPU, from
// /proc/<pid>/schedstat (nanoseconds; 0 without it).
func schedCPU(pid uint32) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
	if err != nil {
		return 0
	}
	f := bytes.Fields(raw)
	if len(f) == 0 {
		return 0
	}
	ns, _ := strconv.ParseInt(string(f[0]), 10, 64)
	return time.Duration(ns)
}

// processCPU is this process's CPU time (user and system, every thread).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
