package recovery_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemctl/idemctl/demo"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/db"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/migrations"
	recovery "github.com/idemctl/idemctl/recover"
)

// Benchmarks of resolve, against a persistent database of 1,000,000 inbox
// rows (built once, kept across runs, named after the schema and the data
// rules). scripts/bench-resolve.sh runs them and prints the ratios:
//
//	go test ./recover -run '^$' -bench . -benchtime 3x

//go:embed testdata/bench_inbox.sql
var benchInboxSQL string

const (
	benchRows       = 1_000_000
	benchIdentities = 100_000
	benchPrefix     = "idemctl_bench_"
)

var (
	benchOnce sync.Once
	benchDSN  string
	benchErr  error
)

// benchDatabase returns the benchmark database's DSN, building it when this
// schema and data have none yet (about 30 s) and dropping older ones.
func benchDatabase(b *testing.B) string {
	b.Helper()
	benchOnce.Do(func() {
		sum := sha256.Sum256([]byte(migrations.Digest() + demo.Digest() + benchInboxSQL))
		name := benchPrefix + hex.EncodeToString(sum[:])[:12]
		benchDSN, benchErr = buildBenchDatabase(name)
	})
	if benchErr != nil {
		b.Fatalf("benchmark database: %v", benchErr)
	}
	return benchDSN
}

func buildBenchDatabase(name string) (string, error) {
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, dbtest.AdminURL())
	if err != nil {
		return "", err
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "SELECT pg_advisory_lock(hashtext('idemctl bench database'))"); err != nil {
		return "", err
	}
	defer admin.Exec(context.Background(), "SELECT pg_advisory_unlock(hashtext('idemctl bench database'))")
	rows, err := admin.Query(ctx, "SELECT datname FROM pg_database WHERE datname LIKE 'idemctl\\_bench\\_%' AND datname <> $1", name)
	if err != nil {
		return "", err
	}
	stale, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", err
	}
	for _, s := range stale {
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{s}.Sanitize()+" WITH (FORCE)"); err != nil {
			return "", err
		}
	}
	var exists bool
	if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", err
	}
	if exists {
		return dbtest.URLFor(name), nil
	}
	building := name + "_building"
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{building}.Sanitize()+" WITH (FORCE)"); err != nil {
		return "", err
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{building}.Sanitize()); err != nil {
		return "", err
	}
	fmt.Fprintf(os.Stderr, "building benchmark database %s (%d inbox rows, once)\n", name, benchRows)
	conn, err := pgx.Connect(ctx, dbtest.URLFor(building))
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := migrations.Apply(ctx, conn, migrations.Options{}); err != nil {
		return "", err
	}
	if err := demo.Install(ctx, conn); err != nil {
		return "", err
	}
	// A day partition for every day the rows span (one row a second, back
	// from now), so that none lands in the default partition.
	days := benchRows/86400 + 2
	if _, err := conn.Exec(ctx, "SELECT idem.inbox_body_ensure((now() AT TIME ZONE 'UTC')::date - $1::int, (now() AT TIME ZONE 'UTC')::date + 1)", days); err != nil {
		return "", fmt.Errorf("inbox partitions: %w", err)
	}
	if _, err := conn.Exec(ctx, benchInboxSQL, benchRows); err != nil {
		return "", fmt.Errorf("fill the inbox: %w", err)
	}
	if _, err := conn.Exec(ctx, "VACUUM ANALYZE idem.identity, idem.inbox_body"); err != nil {
		return "", err
	}
	conn.Close(ctx)
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{building}.Sanitize()+" RENAME TO "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", err
	}
	return dbtest.URLFor(name), nil
}

// benchLine writes the input line of bench row g (testdata/bench_inbox.sql's
// rules), with the payload's members in another order and spaced, as a
// client would send it; amount differs from g for a conflicting line.
func benchLine(buf *bytes.Buffer, g, amount int) {
	sum := md5.Sum([]byte(strconv.Itoa(g)))
	fmt.Fprintf(buf, `{"tenant": "bench-%d", "operation_id": "op-%x", "class": "demo.transfer", "payload": {"from": "acct-%d", "to": "acct-%d", "currency": "EUR", "amount": %d}}`+"\n",
		g%16, sum, g%1000, 1000+g%1000, amount)
}

// benchInput is n identities: half already applied, a tenth conflicting,
// the rest absent, in random order. Identities are drawn with replacement, so
// an absent one may come again: the run (dry or not) answers the repeat
// already_applied, as the real run applies the first.
func benchInput(n int, seed uint64) (input []byte, want recovery.Counts) {
	rng := rand.New(rand.NewPCG(seed, 42))
	var buf bytes.Buffer
	want = recovery.Counts{}
	absent := map[int]bool{}
	for i := range n {
		switch p := i % 10; {
		case p < 5:
			g := 1 + rng.IntN(benchRows)
			benchLine(&buf, g, g)
			want[recovery.AlreadyApplied]++
		case p == 5:
			g := 1 + rng.IntN(benchRows)
			benchLine(&buf, g, g+1)
			want[recovery.WouldConflict]++
		default:
			g := benchRows + 1 + rng.IntN(benchRows)
			benchLine(&buf, g, g)
			if absent[g] {
				want[recovery.AlreadyApplied]++
			} else {
				absent[g] = true
				want[recovery.WouldApply]++
			}
		}
	}
	return buf.Bytes(), want
}

// dryRunKeysPerSec holds the baseline measured in this run, for the ratio.
var dryRunKeysPerSec float64

// BenchmarkDryRun: one op = a dry run over 100,000 identities against the
// 1,000,000-row inbox, parsing and hashing included.
//   - select_per_key: the baseline, what a psql script does: one SELECT per
//     identity on one connection;
//   - batched: recovery.Resolver's dry run (batched unnest lookups, pipelined
//     on --concurrency connections);
func BenchmarkDryRun(b *testing.B) {
	dsn := benchDatabase(b)
	ctx := context.Background()
	pool, err := db.Open(ctx, dsn, db.Options{MaxConns: 8})
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	inputs := make([][]byte, 4)
	wants := make([]recovery.Counts, len(inputs))
	for i := range inputs {
		inputs[i], wants[i] = benchInput(benchIdentities, uint64(i+1))
	}
	input := func(i int) []byte { return inputs[i%len(inputs)] }

	batched := func(b *testing.B) {
		r := &recovery.Resolver{Pool: pool, Config: recovery.Config{DryRun: true, Operator: "bench", Concurrency: 4}}
		run := func(in []byte) recovery.Counts {
			sum, err := r.Run(ctx, recovery.NDJSON(bytes.NewReader(in), idem.DefaultMaxPayloadBytes+recovery.LineSlack), func(recovery.Result) error { return nil })
			if err != nil {
				b.Fatal(err)
			}
			return sum.Counts
		}
		run(input(len(inputs) - 1)) // warm the caches as the baseline's first pass does
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if got, want := run(input(i)), wants[i%len(inputs)]; fmt.Sprint(got) != fmt.Sprint(want) {
				b.Fatalf("counts %v, want %v", got, want)
			}
		}
		reportKeys(b)
	}

	b.Run("select_per_key", func(b *testing.B) {
		conn, err := pool.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Release()
		run := func(in []byte) recovery.Counts {
			got := recovery.Counts{}
			absent := map[idem.Identity]bool{} // answered would_apply: a repeat is already applied
			src := recovery.NDJSON(bytes.NewReader(in), idem.DefaultMaxPayloadBytes+recovery.LineSlack)
			for {
				it, err := src.Next()
				if err != nil {
					break
				}
				p, err := idem.Prepare(idem.Command{Identity: idem.Identity{TenantID: it.Request.Tenant, OperationID: it.Request.OperationID},
					Class: it.Request.Class, Payload: it.Request.Payload}, idem.PayloadLimits{})
				if err != nil {
					b.Fatal(err)
				}
				var hash, class string
				err = conn.QueryRow(ctx, "SELECT payload_hash, op_class FROM idem.inbox WHERE tenant_id = $1 AND operation_id = $2",
					p.TenantID, p.OperationID).Scan(&hash, &class)
				switch {
				case err == pgx.ErrNoRows && absent[p.Identity]:
					got[recovery.AlreadyApplied]++
				case err == pgx.ErrNoRows:
					absent[p.Identity] = true
					got[recovery.WouldApply]++
				case err != nil:
					b.Fatal(err)
				case hash == p.Hash && class == p.Class:
					got[recovery.AlreadyApplied]++
				default:
					got[recovery.WouldConflict]++
				}
			}
			return got
		}
		run(input(len(inputs) - 1))
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if got, want := run(input(i)), wants[i%len(inputs)]; fmt.Sprint(got) != fmt.Sprint(want) {
				b.Fatalf("counts %v, want %v", got, want)
			}
		}
		dryRunKeysPerSec = reportKeys(b)
	})
	b.Run("batched", batched)
}

func reportKeys(b *testing.B) float64 {
	keysPerSec := float64(benchIdentities) * float64(b.N) / b.Elapsed().Seconds()
	b.ReportMetric(keysPerSec, "keys/s")
	b.ReportMetric(0, "ns/op")
	if dryRunKeysPerSec > 0 && b.Name() != "BenchmarkDryRun/select_per_key" {
		b.ReportMetric(keysPerSec/dryRunKeysPerSec, "x_select_per_key")
	}
	return keysPerSec
}

// pgbenchTPS holds the pgbench figure measured in this run, for the ratio.
var pgbenchTPS float64

// pgbenchScript calls idem.execute directly with a new random identity and a
// demo.transfer payload drawn like applyInput's, as its canonical text (members
// already in RFC 8785 order); the hash is computed in SQL from the same text.
const pgbenchScript = `\set a random(0, 999)
\set b random(1000, 1999)
\set amt random(1, 100000)
SELECT outcome FROM idem.execute('bench-apply', 'pgb-' || gen_random_uuid(), 'demo.transfer',
  '{"amount":' || :amt || ',"currency":"EUR","from":"acct-' || :a || '","to":"acct-' || :b || '"}',
  'jcs-sha256:' || encode(sha256(convert_to('{"amount":' || :amt || ',"currency":"EUR","from":"acct-' || :a || '","to":"acct-' || :b || '"}', 'UTF8')), 'hex'));
`

// applyInput is n new operations in tenant bench-apply.
func applyInput(n int, run string) []byte {
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	var buf bytes.Buffer
	for i := range n {
		fmt.Fprintf(&buf, `{"tenant": "bench-apply", "operation_id": "rsv-%s-%d", "class": "demo.transfer", "payload": {"from": "acct-%d", "to": "acct-%d", "amount": %d, "currency": "EUR"}}`+"\n",
			run, i, rng.IntN(1000), 1000+rng.IntN(1000), 1+rng.IntN(100000))
	}
	return buf.Bytes()
}

var tpsRE = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)

// BenchmarkApply compares resolve's apply path at concurrency 4 with pgbench
// calling idem.execute directly with 4 clients, on the same database in the
// same run. One op = one operation applied.
func BenchmarkApply(b *testing.B) {
	dsn := benchDatabase(b)
	ctx := context.Background()
	b.Run("pgbench_c4", func(b *testing.B) {
		if _, err := exec.LookPath("pgbench"); err != nil {
			b.Skip("pgbench is not installed (it ships with PostgreSQL: apt-get install postgresql-client)")
		}
		script := filepath.Join(b.TempDir(), "execute.sql")
		if err := os.WriteFile(script, []byte(pgbenchScript), 0o600); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		out, err := exec.Command("pgbench", "-n", "-c", "4", "-j", "2", "-T", "10", "-f", script, dsn).CombinedOutput()
		if err != nil {
			b.Fatalf("pgbench: %v\n%s", err, out)
		}
		m := tpsRE.FindSubmatch(out)
		if m == nil {
			b.Fatalf("pgbench printed no tps:\n%s", out)
		}
		pgbenchTPS, _ = strconv.ParseFloat(string(m[1]), 64)
		b.ReportMetric(pgbenchTPS, "ops/s")
		b.ReportMetric(0, "ns/op")
	})
	b.Run("resolve_c4", func(b *testing.B) {
		pool, err := db.Open(ctx, dsn, db.Options{MaxConns: 5})
		if err != nil {
			b.Fatal(err)
		}
		defer pool.Close()
		r := &recovery.Resolver{Pool: pool, Config: recovery.Config{Operator: "bench", Concurrency: 4}}
		in := applyInput(b.N, strconv.FormatInt(time.Now().UnixNano(), 36))
		b.ResetTimer()
		sum, err := r.Run(ctx, recovery.NDJSON(bytes.NewReader(in), idem.DefaultMaxPayloadBytes+recovery.LineSlack), func(recovery.Result) error { return nil })
		if err != nil {
			b.Fatal(err)
		}
		if sum.Counts[recovery.Applied] != b.N {
			b.Fatalf("counts %v, want %d applied", sum.Counts, b.N)
		}
		ops := float64(b.N) / b.Elapsed().Seconds()
		b.ReportMetric(ops, "ops/s")
		if pgbenchTPS > 0 {
			b.ReportMetric(ops/pgbenchTPS, "x_pgbench")
		}
	})
}

var rssRE = regexp.MustCompile(`Maximum resident set size \(kbytes\): (\d+)`)

// BenchmarkDryRunPeakRSS runs the real binary, `idemctl resolve --dry-run -o
// json`, under /usr/bin/time -v (stdout to /dev/null) over two generated files
// of 1,000,000 lines: the benchmark mix (half applied, a tenth conflicting,
// the rest absent) and 1,000,000 distinct absent identities, the worst case
// for the dry run's memory of would_apply identities. It reports the peak
// resident memory of both (peak_MiB, the larger; target <= 200 MiB) and the
// throughput end to end.
func BenchmarkDryRunPeakRSS(b *testing.B) {
	if _, err := os.Stat("/usr/bin/time"); err != nil {
		b.Skip("/usr/bin/time is not installed (apt-get install time)")
	}
	dsn := benchDatabase(b)
	dir := b.TempDir()
	bin := filepath.Join(dir, "idemctl")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/idemctl/idemctl/cmd/idemctl").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	const lines = 1_000_000
	write := func(name string, chunk func(i int) []byte) string {
		path := filepath.Join(dir, name)
		file, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		for i := range lines / benchIdentities {
			if _, err := file.Write(chunk(i)); err != nil {
				b.Fatal(err)
			}
		}
		if err := file.Close(); err != nil {
			b.Fatal(err)
		}
		return path
	}
	mixed := write("ambiguous.ndjson", func(i int) []byte {
		in, _ := benchInput(benchIdentities, uint64(100+i))
		return in
	})
	distinct := write("distinct.ndjson", func(i int) []byte {
		var buf bytes.Buffer
		for k := range benchIdentities {
			g := 3*benchRows + i*benchIdentities + k // never in the bench inbox
			benchLine(&buf, g, g)
		}
		return buf.Bytes()
	})
	peak := func(path string) int {
		cmd := exec.Command("/usr/bin/time", "-v", bin, "resolve", "--dry-run", "--file", path, "-o", "json", "--dsn", dsn, "--operator", "bench")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exitErr *exec.ExitError
		if err != nil && !(errors.As(err, &exitErr) && exitErr.ExitCode() == 3) { // 3: the input holds conflicts
			b.Fatalf("resolve: %v\n%s", err, stderr.String())
		}
		m := rssRE.FindSubmatch(stderr.Bytes())
		if m == nil {
			b.Fatalf("no peak RSS in:\n%s", stderr.String())
		}
		kib, _ := strconv.Atoi(string(m[1]))
		return kib
	}
	b.ResetTimer()
	var mixedKiB, distinctKiB int
	for i := 0; i < b.N; i++ {
		mixedKiB = max(mixedKiB, peak(mixed))
		distinctKiB = max(distinctKiB, peak(distinct))
	}
	b.ReportMetric(float64(max(mixedKiB, distinctKiB))/1024, "peak_MiB")
	b.ReportMetric(float64(mixedKiB)/1024, "mixed_peak_MiB")
	b.ReportMetric(float64(distinctKiB)/1024, "distinct_peak_MiB")
	b.ReportMetric(2*float64(lines)*float64(b.N)/b.Elapsed().Seconds(), "keys/s")
	b.ReportMetric(0, "ns/op")
}
