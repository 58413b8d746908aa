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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemctl/idemctl/demo"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/db"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/migrations"
	"github.com/idemctl/idemctl/recovery"
)

// Benchmarks of resolve, against a persistent database of 1,000,000 inbox
// rows (built once, kept across runs, named after the schema and the data
// rules). scripts/bench-resolve.sh runs them and prints the ratios:
//
//	go test ./recovery -run '^$' -bench . -benchtime 3x

//go:embed testdata/bench_inbox.sql
var benchInboxSQL string

//go:embed testdata/bench_inbox_tenants.sql
var benchTenantsSQL string

const (
	benchRows       = 1_000_000
	bigBenchRows    = 10_000_000
	benchIdentities = 100_000
	benchPrefix     = "idemctl_bench_"
)

// benchDB is one benchmark database, built at most once per test binary.
type benchDB struct {
	once sync.Once
	dsn  string
	err  error
}

// benchShape is what a benchmark inbox holds: rows identities in tenants
// tenants; days 0 puts a row a second back from now (testdata/bench_inbox.sql),
// days > 0 spreads the rows evenly over that many days
// (testdata/bench_inbox_tenants.sql, the shape of the busy service where a
// batched lookup once became a scan).
type benchShape struct{ rows, tenants, days int }

var (
	benchInbox   = benchShape{benchRows, 16, 0}
	bigInbox     = benchShape{bigBenchRows, 16, 0}
	tenantsInbox = benchShape{benchRows, 100, 23}
)

var benchDBs = map[benchShape]*benchDB{benchInbox: {}, bigInbox: {}, tenantsInbox: {}}

// benchDatabase returns the DSN of the benchmark database of rows inbox rows,
// building it when this schema and data have none yet (about 30 s a million
// rows) and dropping those of older schemas.
func benchDatabase(b *testing.B, rows int) string {
	b.Helper()
	if rows == bigBenchRows {
		return shapedBenchDatabase(b, bigInbox)
	}
	return shapedBenchDatabase(b, benchInbox)
}

func shapedBenchDatabase(b *testing.B, shape benchShape) string {
	b.Helper()
	d := benchDBs[shape]
	d.once.Do(func() {
		sum := sha256.Sum256([]byte(migrations.Digest() + demo.Digest() + benchInboxSQL))
		version := hex.EncodeToString(sum[:])[:12]
		d.dsn, d.err = buildBenchDatabase(version, shape)
	})
	if d.err != nil {
		b.Fatalf("benchmark database: %v", d.err)
	}
	return d.dsn
}

func buildBenchDatabase(version string, shape benchShape) (string, error) {
	rows := shape.rows
	name := fmt.Sprintf("%s%s_%dk", benchPrefix, version, rows/1000)
	if shape.days > 0 {
		sum := sha256.Sum256([]byte(benchTenantsSQL))
		name += fmt.Sprintf("_%dt_%dd_%x", shape.tenants, shape.days, sum[:3])
	}
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
	found, err := admin.Query(ctx, "SELECT datname FROM pg_database WHERE datname LIKE 'idemctl\\_bench\\_%' AND datname NOT LIKE $1",
		benchPrefix+version+"%")
	if err != nil {
		return "", err
	}
	stale, err := pgx.CollectRows(found, pgx.RowTo[string])
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
	fmt.Fprintf(os.Stderr, "building benchmark database %s (%d inbox rows, once)\n", name, rows)
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
	days := rows/86400 + 2
	if shape.days > 0 {
		days = shape.days + 2
	}
	if _, err := conn.Exec(ctx, "SELECT idem.inbox_body_ensure((now() AT TIME ZONE 'UTC')::date - $1::int, (now() AT TIME ZONE 'UTC')::date + 1)", days); err != nil {
		return "", fmt.Errorf("inbox partitions: %w", err)
	}
	fill, args := benchInboxSQL, []any{rows}
	if shape.days > 0 {
		fill, args = benchTenantsSQL, []any{rows, shape.tenants, shape.days}
	}
	if _, err := conn.Exec(ctx, fill, args...); err != nil {
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
func benchLine(buf *bytes.Buffer, g, amount int) { benchLineOf(buf, g, amount, 16) }

// benchLineOf is benchLine for an inbox of that many tenants.
func benchLineOf(buf *bytes.Buffer, g, amount, tenants int) {
	sum := md5.Sum([]byte(strconv.Itoa(g)))
	fmt.Fprintf(buf, `{"tenant": "bench-%d", "operation_id": "op-%x", "class": "demo.transfer", "payload": {"from": "acct-%d", "to": "acct-%d", "currency": "EUR", "amount": %d}}`+"\n",
		g%tenants, sum, g%1000, 1000+g%1000, amount)
}

// benchInput is n identities: half already applied, a tenth conflicting,
// the rest absent, in random order. Identities are drawn with replacement, so
// an absent one may come again: the run (dry or not) answers the repeat
// already_applied, as the real run applies the first.
func benchInput(n int, seed uint64, rows int) (input []byte, want recovery.Counts) {
	return benchInputOf(n, seed, rows, 16)
}

// benchInputOf is benchInput for an inbox of that many tenants.
func benchInputOf(n int, seed uint64, rows, tenants int) (input []byte, want recovery.Counts) {
	rng := rand.New(rand.NewPCG(seed, 42))
	var buf bytes.Buffer
	want = recovery.Counts{}
	absent := map[int]bool{}
	for i := range n {
		switch p := i % 10; {
		case p < 5:
			g := 1 + rng.IntN(rows)
			benchLineOf(&buf, g, g, tenants)
			want[recovery.AlreadyApplied]++
		case p == 5:
			g := 1 + rng.IntN(rows)
			benchLineOf(&buf, g, g+1, tenants)
			want[recovery.WouldConflict]++
		default:
			g := rows + 1 + rng.IntN(rows)
			benchLineOf(&buf, g, g, tenants)
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
	dsn := benchDatabase(b, benchRows)
	ctx := context.Background()
	pool, err := db.Open(ctx, dsn, db.Options{MaxConns: 8})
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	input, want := dryRunInputs(benchRows)

	b.Run("select_per_key", func(b *testing.B) { selectPerKey(b, pool, input, want) })
	b.Run("batched", func(b *testing.B) { dryRunBatched(b, pool, input, want) })
}

// largeBenchEnv opts in to BenchmarkDryRunLarge, whose database takes some
// minutes of I/O to build.
const largeBenchEnv = "IDEMCTL_BENCH_10M"

// BenchmarkDryRunLarge is BenchmarkDryRun's batched run over a
// 10,000,000-row inbox, which does not fit in a default shared_buffers (the
// database, about 6 GB, is built once: some minutes). Opt-in: it runs only
// with IDEMCTL_BENCH_10M=1. Target: >= 150,000 keys/s.
func BenchmarkDryRunLarge(b *testing.B) {
	if os.Getenv(largeBenchEnv) == "" {
		b.Skipf("set %s=1 to build (once, some minutes, about 6 GB) and measure the 10,000,000-row inbox", largeBenchEnv)
	}
	dsn := benchDatabase(b, bigBenchRows)
	pool, err := db.Open(context.Background(), dsn, db.Options{MaxConns: 8})
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	input, want := dryRunInputs(bigBenchRows)
	dryRunBatched(b, pool, input, want)
}

// BenchmarkDryRunTenants is BenchmarkDryRun's batched run over the inbox of
// issue 26's scan: 1,000,000 rows of 100 tenants spread over 23 day
// partitions.
func BenchmarkDryRunTenants(b *testing.B) {
	dsn := shapedBenchDatabase(b, tenantsInbox)
	pool, err := db.Open(context.Background(), dsn, db.Options{MaxConns: 8})
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	input, want := dryRunInputsOf(tenantsInbox.rows, tenantsInbox.tenants)
	b.Run("select_per_key", func(b *testing.B) { selectPerKey(b, pool, input, want) })
	b.Run("batched", func(b *testing.B) { dryRunBatched(b, pool, input, want) })
}

// selectPerKey is the baseline of a dry run: what a psql script does, one
// SELECT per identity on one connection, after a warming pass.
func selectPerKey(b *testing.B, pool *pgxpool.Pool, input func(int) []byte, want func(int) recovery.Counts) {
	ctx := context.Background()
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
	run(input(3))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if got := run(input(i)); fmt.Sprint(got) != fmt.Sprint(want(i)) {
			b.Fatalf("counts %v, want %v", got, want(i))
		}
	}
	dryRunKeysPerSec = reportKeys(b)
}

// dryRunInputs are four inputs of benchIdentities lines over an inbox of
// rows, and their expected counts.
func dryRunInputs(rows int) (input func(int) []byte, want func(int) recovery.Counts) {
	return dryRunInputsOf(rows, 16)
}

func dryRunInputsOf(rows, tenants int) (input func(int) []byte, want func(int) recovery.Counts) {
	inputs := make([][]byte, 4)
	wants := make([]recovery.Counts, len(inputs))
	for i := range inputs {
		inputs[i], wants[i] = benchInputOf(benchIdentities, uint64(i+1), rows, tenants)
	}
	return func(i int) []byte { return inputs[i%len(inputs)] }, func(i int) recovery.Counts { return wants[i%len(wants)] }
}

// dryRunBatched is resolve's dry run (batched unnest lookups, pipelined on
// --concurrency connections) over the inputs, after a warming pass.
func dryRunBatched(b *testing.B, pool *pgxpool.Pool, input func(int) []byte, want func(int) recovery.Counts) {
	ctx := context.Background()
	r := &recovery.Resolver{Pool: pool, Config: recovery.Config{DryRun: true, Operator: "bench", Concurrency: 4}}
	run := func(in []byte) recovery.Counts {
		sum, err := r.Run(ctx, recovery.NDJSON(bytes.NewReader(in), idem.DefaultMaxPayloadBytes+recovery.LineSlack), func(recovery.Result) error { return nil })
		if err != nil {
			b.Fatal(err)
		}
		return sum.Counts
	}
	run(input(3)) // warm the caches as the baseline's first pass does
	cpu := startCPU(b, pool)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if got := run(input(i)); fmt.Sprint(got) != fmt.Sprint(want(i)) {
			b.Fatalf("counts %v, want %v", got, want(i))
		}
	}
	b.StopTimer()
	cpu.report(b, benchIdentities*b.N)
	reportKeys(b)
}

// cpuMeter measures CPU time over a benchmark: this process's (the client)
// and that of the server backends of the database (from /proc: the server
// runs on this machine), both in µs per key.
type cpuMeter struct {
	pids           []int
	client, server time.Duration
}

func startCPU(b *testing.B, pool *pgxpool.Pool) *cpuMeter {
	rows, err := pool.Query(context.Background(),
		"SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend'")
	if err != nil {
		b.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		b.Fatal(err)
	}
	m := &cpuMeter{}
	for _, p := range pids {
		m.pids = append(m.pids, int(p))
	}
	m.client, m.server = processCPU(os.Getpid()), m.serverCPU()
	return m
}

func (m *cpuMeter) serverCPU() time.Duration {
	var sum time.Duration
	for _, p := range m.pids {
		sum += processCPU(p)
	}
	return sum
}

func (m *cpuMeter) report(b *testing.B, keys int) {
	client, server := processCPU(os.Getpid())-m.client, m.serverCPU()-m.server
	if client <= 0 || server <= 0 {
		return // no /proc, or a server elsewhere
	}
	b.ReportMetric(float64(client.Microseconds())/float64(keys), "client_us/key")
	b.ReportMetric(float64(server.Microseconds())/float64(keys), "server_us/key")
}

// processCPU is a process's user and system time from /proc (0 without).
func processCPU(pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name (which may hold spaces) in brackets.
	f := bytes.Fields(raw[bytes.LastIndexByte(raw, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(string(f[11]), 10, 64)
	stime, _ := strconv.ParseInt(string(f[12]), 10, 64)
	return time.Duration(utime+stime) * (time.Second / 100) // USER_HZ is 100 on Linux
}

func reportKeys(b *testing.B) float64 {
	keysPerSec := float64(benchIdentities) * float64(b.N) / b.Elapsed().Seconds()
	b.ReportMetric(keysPerSec, "keys/s")
	b.ReportMetric(0, "ns/op")
	if dryRunKeysPerSec > 0 && !strings.HasSuffix(b.Name(), "/select_per_key") {
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

// applyConns is the concurrency of BenchmarkApply.
const applyConns = 16

// BenchmarkApply compares resolve's apply path at concurrency 16 with pgbench
// calling idem.execute directly with 16 clients (simple query mode, one
// statement a transaction), on the same database in the same run. One op =
// one operation applied. Target: resolve >= 1.0x.
func BenchmarkApply(b *testing.B) {
	dsn := benchDatabase(b, benchRows)
	ctx := context.Background()
	b.Run(fmt.Sprintf("pgbench_c%d", applyConns), func(b *testing.B) {
		pgbenchTPS, _ = dbtest.Pgbench(b, dsn, pgbenchScript, applyConns, 10)
		b.ReportMetric(pgbenchTPS, "ops/s")
		b.ReportMetric(0, "ns/op")
	})
	b.Run(fmt.Sprintf("resolve_c%d", applyConns), func(b *testing.B) {
		pool, err := db.Open(ctx, dsn, db.Options{MaxConns: applyConns + 1})
		if err != nil {
			b.Fatal(err)
		}
		defer pool.Close()
		r := &recovery.Resolver{Pool: pool, Config: recovery.Config{Operator: "bench", Concurrency: applyConns}}
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
	dsn := benchDatabase(b, benchRows)
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
		in, _ := benchInput(benchIdentities, uint64(100+i), benchRows)
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

// rerunInput is n lines as after a crash: identities already applied (rows
// of the benchmark inbox) but for one line in every newEvery (0: none), a new
// one in tenant bench-rerun named by run, in random order.
func rerunInput(n, newEvery int, run string) []byte {
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
	var buf bytes.Buffer
	for i := range n {
		if newEvery > 0 && i%newEvery == 0 {
			fmt.Fprintf(&buf, `{"tenant": "bench-rerun", "operation_id": "rerun-%s-%d", "class": "demo.transfer", "payload": {"from": "acct-%d", "to": "acct-%d", "amount": %d, "currency": "EUR"}}`+"\n",
				run, i, rng.IntN(1000), 1000+rng.IntN(1000), 1+rng.IntN(100000))
			continue
		}
		g := 1 + rng.IntN(benchRows)
		benchLine(&buf, g, g)
	}
	return buf.Bytes()
}

// BenchmarkRerun: a real run of 100,000 lines as after a crash against a dry
// run of the same lines, in the same run, at the default concurrency: 95%
// already applied (the table's figure; target: the real run at least 0.5x
// the dry run's lines per second) and 100% (what the lookups alone cost: the
// rest of the first case is 5,000 operations applied, one transaction and
// commit flush each). One op = both runs over a fresh input.
func BenchmarkRerun(b *testing.B) {
	dsn := benchDatabase(b, benchRows)
	ctx := context.Background()
	pool, err := db.Open(ctx, dsn, db.Options{MaxConns: recovery.DefaultConcurrency + 1})
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	run := func(in []byte, dry bool) (recovery.Counts, time.Duration) {
		r := &recovery.Resolver{Pool: pool, Config: recovery.Config{DryRun: dry, Operator: "bench"}}
		start := time.Now()
		sum, err := r.Run(ctx, recovery.NDJSON(bytes.NewReader(in), idem.DefaultMaxPayloadBytes+recovery.LineSlack), func(recovery.Result) error { return nil })
		if err != nil {
			b.Fatal(err)
		}
		return sum.Counts, time.Since(start)
	}
	for _, c := range []struct {
		name     string
		newEvery int
	}{{"applied=95%", 20}, {"applied=100%", 0}} {
		b.Run(c.name, func(b *testing.B) {
			var dryTime, realTime time.Duration
			for i := 0; i < b.N; i++ {
				in := rerunInput(benchIdentities, c.newEvery, fmt.Sprintf("%d-%d", time.Now().UnixNano(), i))
				dc, dt := run(in, true)
				rc, rt := run(in, false)
				if rc[recovery.Applied] != dc[recovery.WouldApply] || rc[recovery.AlreadyApplied] != dc[recovery.AlreadyApplied] {
					b.Fatalf("the real run answered %v, its dry run %v", rc, dc)
				}
				dryTime, realTime = dryTime+dt, realTime+rt
			}
			lines := float64(benchIdentities * b.N)
			b.ReportMetric(lines/dryTime.Seconds(), "dry_lines/s")
			b.ReportMetric(lines/realTime.Seconds(), "real_lines/s")
			b.ReportMetric(dryTime.Seconds()/realTime.Seconds(), "x_dry_run")
			b.ReportMetric(0, "ns/op")
		})
	}
}
