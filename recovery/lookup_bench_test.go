package recovery_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemctl/idemctl/internal/db"
	"github.com/idemctl/idemctl/recovery"
)

var (
	//go:embed testdata/lookup_stage_unnest.sql
	lookupStageUnnestSQL string
	//go:embed testdata/lookup_stage_identity.sql
	lookupStageIdentitySQL string
)

// lookupBatch is one batch of the dry run's lookup: the four arrays in
// primary-key order, as recovery.lookupKeysOf sends them.
type lookupBatch struct {
	tenants, ops, classes []string
	digests               [][]byte
}

// benchLookupBatch draws n keys of the 1,000,000-row benchmark inbox in the
// dry-run benchmark's mix (half applied, a tenth conflicting, the rest
// absent; testdata/bench_inbox.sql's rules), sorted as the lookup sends them.
func benchLookupBatch(n int, rng *rand.Rand) lookupBatch {
	type key struct {
		tenant, op string
		digest     []byte
	}
	keys := make([]key, n)
	for i := range keys {
		g := 1 + rng.IntN(benchRows)
		if i%10 >= 6 {
			g += benchRows // absent
		}
		payload := fmt.Sprintf(`{"amount":%d,"currency":"EUR","from":"acct-%d","to":"acct-%d"}`, g, g%1000, 1000+g%1000)
		if i%10 == 5 {
			payload += " " // another payload: a conflict
		}
		sum, digest := md5.Sum([]byte(strconv.Itoa(g))), sha256.Sum256([]byte(payload))
		keys[i] = key{fmt.Sprintf("bench-%d", g%16), "op-" + hex.EncodeToString(sum[:]), digest[:]}
	}
	slices.SortFunc(keys, func(x, y key) int {
		if c := strings.Compare(x.tenant, y.tenant); c != 0 {
			return c
		}
		return strings.Compare(x.op, y.op)
	})
	var b lookupBatch
	for _, k := range keys {
		b.tenants, b.ops, b.digests, b.classes = append(b.tenants, k.tenant), append(b.ops, k.op), append(b.digests, k.digest), append(b.classes, "demo.transfer")
	}
	return b
}

// lookupBenchDSNEnv points BenchmarkLookupServerCPU at another copy of the
// 1,000,000-row benchmark inbox (one with an index under trial, say).
const lookupBenchDSNEnv = "IDEMCTL_BENCH_LOOKUP_DSN"

// BenchmarkLookupServerCPU splits the server's CPU per key of the dry run's
// batched lookup (batches of recovery.DefaultBatchSize keys on the
// 1,000,000-row inbox, one connection, run as the dry run runs it: in a
// transaction after sql/probe_only.sql) into stages: the arrays alone
// (unnest), the probe of idem.identity added (identity), and the whole
// lookup with the probe of the body (lookup). Each stage runs on one batch
// repeated (hot: every page it touches in shared_buffers) and on a new batch
// each time (fresh: as in a dry run, where the inbox, about 600 MB, does not
// fit in a default shared_buffers of 128 MB and most pages come from the OS
// page cache). server_us/key is the backend's CPU from /proc/<pid>/schedstat.
// With IDEMCTL_BENCH_LOOKUP_DSN it runs on that database instead.
//
//	go test ./recovery -run '^$' -bench BenchmarkLookupServerCPU -benchtime 20x
func BenchmarkLookupServerCPU(b *testing.B) {
	dsn := os.Getenv(lookupBenchDSNEnv)
	if dsn == "" {
		dsn = benchDatabase(b, benchRows)
	}
	ctx := context.Background()
	pool, err := db.Open(ctx, dsn, db.Options{MaxConns: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Release()
	var pid uint32
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		b.Fatal(err)
	}
	if schedCPU(pid) == 0 {
		b.Skip("no /proc/<pid>/schedstat of the server's backend (a server elsewhere)")
	}
	n := recovery.DefaultBatchSize
	rng := rand.New(rand.NewPCG(26, 4))
	hot := benchLookupBatch(n, rng)
	run := func(b *testing.B, sql string, k lookupBatch) {
		tx, err := conn.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, recovery.ProbeOnlySQL); err != nil {
			b.Fatal(err)
		}
		rows, err := tx.Query(ctx, sql, k.tenants, k.ops, k.digests, k.classes, false)
		if err != nil {
			b.Fatal(err)
		}
		for rows.Next() {
			_ = rows.RawValues()
		}
		if err := rows.Err(); err != nil {
			b.Fatal(err)
		}
	}
	for _, stage := range []struct{ name, sql string }{
		{"unnest", lookupStageUnnestSQL}, {"identity", lookupStageIdentitySQL}, {"lookup", recovery.LookupSQL},
	} {
		for _, fresh := range []bool{false, true} {
			name := stage.name + "/hot"
			if fresh {
				name = stage.name + "/fresh"
			}
			b.Run(name, func(b *testing.B) {
				batches := []lookupBatch{hot}
				if fresh {
					batches = make([]lookupBatch, b.N)
					for i := range batches {
						batches[i] = benchLookupBatch(n, rng)
					}
				}
				for range 3 { // plans cached, the hot batch's pages read in
					run(b, stage.sql, hot)
				}
				cpu := schedCPU(pid)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					run(b, stage.sql, batches[i%len(batches)])
				}
				b.StopTimer()
				keys := float64(n * b.N)
				b.ReportMetric(float64((schedCPU(pid)-cpu).Nanoseconds())/1000/keys, "server_us/key")
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1000/keys, "wall_us/key")
				b.ReportMetric(0, "ns/op")
			})
		}
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
