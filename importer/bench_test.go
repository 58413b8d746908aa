//go:build unix

package importer_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/importer"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// TestImportSpeed measures BENCHMARKS.md's import figure: a rocket-rides
// store of IDEMCTL_BENCH_IMPORT_ROWS keys (1000000 for the figure) over
// three years, planned, approved and run; it prints the rows a second of
// each step and the peak memory of idemctl's process and of the database
// backend that ran the plan. Skipped unless the variable is set.
func TestImportSpeed(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("IDEMCTL_BENCH_IMPORT_ROWS"))
	if n <= 0 {
		t.Skip("SKIPPED LOUDLY: a measurement that seeds a store for minutes; run it with IDEMCTL_BENCH_IMPORT_ROWS=1000000 go test ./importer -run TestImportSpeed -v (its figure is in BENCHMARKS.md)")
	}
	f := setup(t)
	rocketSetup(t, f)
	start := time.Now()
	// By slices of 100,000 rows: each statement stays within the helper's
	// minute on a loaded machine.
	for lo := 1; lo <= n; lo += 100000 {
		dbtest.Admin(t, f.dsn, `
		INSERT INTO rocket.idempotency_keys (created_at, idempotency_key, last_run_at, locked_at, request_method,
		                                     request_params, request_path, response_code, response_body, recovery_point, user_id)
		SELECT now() - interval '1095 days' * (1 - g::float8 / $1), 'key-' || g, now(), NULL, 'POST',
		       jsonb_build_object('amount', 1000 + g % 5000, 'currency', 'usd', 'origin_lat', 37.7749, 'origin_lon', -122.4194,
		                          'target_lat', 37.8044, 'target_lon', -122.2712),
		       '/rides', 201, jsonb_build_object('id', 'ride_' || g, 'charge', 'ch_' || g, 'status', 'succeeded'),
		       'finished', 1 + g % 1000
		FROM generate_series($2::int, least($2::int + 99999, $1::int)) g`, n, lo)
	}
	dbtest.Admin(t, f.dsn, "VACUUM ANALYZE rocket.idempotency_keys")
	t.Logf("source: %d rows written in %s", n, time.Since(start).Round(time.Millisecond))

	if os.Getenv("IDEMCTL_BENCH_EXPLAIN") != "" {
		for _, set := range []string{"session_preload_libraries = 'auto_explain'", "auto_explain.log_min_duration = '50ms'",
			"auto_explain.log_analyze = on", "auto_explain.log_timing = off", "auto_explain.log_buffers = on", "auto_explain.log_nested_statements = on"} {
			dbtest.Admin(t, f.dsn, "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET "+strings.ReplaceAll(set, "'", "''")+"', current_database()); END $$")
		}
	}
	// Two connections: the run enters its chunks on both (one a core).
	alice := dbtest.PoolAs(t, f.dsn, dbtest.Operator, 2)
	var pids []int
	var conns []*pgxpool.Conn
	for range 2 {
		c, err := alice.Acquire(f.ctx)
		require.NoError(t, err)
		var pid int
		require.NoError(t, c.QueryRow(f.ctx, "SELECT pg_backend_pid()").Scan(&pid))
		pids, conns = append(pids, pid), append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}
	// bob's one connection, for the approval (its backend counted too)
	bob := dbtest.PoolAs(t, f.dsn, dbtest.Operator2, 1)
	var bobPID int
	require.NoError(t, bob.QueryRow(f.ctx, "SELECT pg_backend_pid()").Scan(&bobPID))
	pids = append(pids, bobPID)
	src := importer.PostgresSource{DSN: dbtest.SourceDSN(f.dsn), Query: rocketQuery, PasswordEnv: dbtest.SourcePasswordEnv}.Opener()
	// The backends' time on a CPU and waiting for one (schedstat), and
	// idemctl's CPU time.
	var queued time.Duration
	cpu := func() (backend, self time.Duration) {
		queued = 0
		for _, pid := range pids {
			if raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid)); err == nil {
				f := strings.Fields(string(raw))
				ns, _ := strconv.ParseInt(f[0], 10, 64)
				wait, _ := strconv.ParseInt(f[1], 10, 64)
				backend, queued = backend+time.Duration(ns), queued+time.Duration(wait)
			}
		}
		var ru syscall.Rusage
		require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
		self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		return backend, self
	}
	b0, s0 := cpu()
	q0 := queued
	start = time.Now()
	r, err := importer.Plan(f.ctx, alice, src, importer.PlanOptions{Class: rideCharge, Correction: ridesLedger, Operator: "alice", Reason: "bench"},
		importer.Sinks{})
	require.NoError(t, err)
	plan := time.Since(start)
	b1, s1 := cpu()
	q1 := queued
	require.Equal(t, n, r.Counts.ToImport)
	start = time.Now()
	_, err = importer.Approve(f.ctx, bob, r.Plan.ID, "bob", src)
	require.NoError(t, err)
	approve := time.Since(start)
	b2, s2 := cpu()
	q2 := queued
	_ = q1
	start = time.Now()
	_, err = importer.Run(f.ctx, alice, r.Plan.ID, "alice", func(ctx context.Context, since *importer.Cursor, ordered bool) (importer.Source, error) {
		return importer.PostgresSource{DSN: dbtest.SourceDSN(f.dsn), Query: rocketQuery, PasswordEnv: dbtest.SourcePasswordEnv, Unordered: !ordered}.Open(ctx)
	})
	require.NoError(t, err)
	run := time.Since(start)
	b3, s3 := cpu()
	q3 := queued
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	var backends []string
	for _, pid := range pids {
		backend := "unknown"
		if raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
			if m := regexp.MustCompile(`VmHWM:\s+(\d+) kB`).FindSubmatch(raw); m != nil {
				kb, _ := strconv.Atoi(string(bytes.TrimSpace(m[1])))
				backend = fmt.Sprintf("%d MiB", kb>>10)
			}
		}
		backends = append(backends, backend)
	}
	backend := strings.Join(backends, " and ")
	var parts int
	require.NoError(t, alice.QueryRow(f.ctx, "SELECT count(*) FROM idem.inbox_body_partitions()").Scan(&parts))
	// The baseline, in the same run: the store's rows copied once by the
	// server itself into a table without index.
	dbtest.Admin(t, f.dsn, "CREATE TABLE rocket.copy (LIKE rocket.idempotency_keys)")
	start = time.Now()
	dbtest.Admin(t, f.dsn, "INSERT INTO rocket.copy SELECT * FROM rocket.idempotency_keys")
	baseline := time.Since(start)
	rate := func(d time.Duration) int { return int(float64(n) / d.Seconds()) }
	ms := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	total := plan + approve + run
	t.Logf("import of %d rows (plan + approve + run), end to end %s: %d rows/s", n, ms(total), rate(total))
	t.Logf("  plan    %s (%d rows/s): database backends' CPU %s (waited for a CPU %s), idemctl CPU %s", ms(plan), rate(plan),
		ms(b1-b0), ms(q1-q0), ms(s1-s0))
	t.Logf("  approve %s (%d rows/s; the source read again and compared with the stage): database backends' CPU %s, idemctl CPU %s",
		ms(approve), rate(approve), ms(b2-b1), ms(s2-s1))
	t.Logf("  run     %s (%d rows/s): database backends' CPU %s (waited for a CPU %s), idemctl CPU %s", ms(run), rate(run),
		ms(b3-b2), ms(q3-q2), ms(s3-s2))
	t.Logf("  baseline INSERT ... SELECT of the store into an unindexed table %s (%d rows/s); end to end / baseline %.1fx",
		ms(baseline), rate(baseline), total.Seconds()/baseline.Seconds())
	t.Logf("  peak RSS: idemctl %d MiB, database backends %s (VmHWM); %d body partitions", ru.Maxrss>>10, backend, parts)
}
