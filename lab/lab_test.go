package lab

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/internal/lockedbuf"
)

// Env of the interruption test's child: run the lab until a signal.
const runEnv = "IDEMCTL_LAB_TEST_RUN"

// TestMain makes this test binary the child of the interruption test (and a
// lab worker there), and gives the other tests a directory for the worker
// binary they use (testWorker).
func TestMain(m *testing.M) {
	switch {
	case os.Getenv(WorkerEnv) == "1":
		if err := Worker(context.Background(), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "lab worker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	case os.Getenv(runEnv) != "":
		os.Exit(interruptibleRun(os.Getenv(runEnv)))
	}
	dbtest.RunInTempDir(m, "idemctl-lab-test-", &workerDir)
}

var (
	workerDir  string // set by TestMain, removed after the tests
	workerOnce sync.Once
	workerBin  string
	workerErr  error
)

// testWorker is lab.Worker in a binary of its own (lab/internal/labworker),
// built once without the race detector: a trial starts a worker process, and
// a race-enabled test binary takes several times longer to start (the lab's
// own code runs under the race detector in this binary), idemctl about twice
// as long (71 ms of CPU a start against 40). idemctl lab runs the same
// function as `idemctl lab worker`, which internal/cli/lab's tests run.
func testWorker(t testing.TB) WorkerCommand {
	t.Helper()
	workerOnce.Do(func() {
		workerBin = filepath.Join(workerDir, "labworker")
		cmd := exec.Command("go", "build", "-o", workerBin, "github.com/idemctl/idemctl/lab/internal/labworker")
		cmd.Env = append(os.Environ(), "GOFLAGS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			workerErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(t, workerErr)
	return WorkerCommand{Path: workerBin}
}

func scratchSchemas(t testing.TB, conn *pgx.Conn) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), `SELECT nspname FROM pg_namespace WHERE nspname LIKE 'idemlab\_%' ORDER BY 1`)
	require.NoError(t, err)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return names
}

func connect(t testing.TB, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// ciTrials is the CI run's trials per design (seed 1). At 30 every broken
// design shows each anomaly it exists to show at least 4 times (redis_inbox's
// doubled; the others 7 or more), every design reaches at least six kill
// points and races overlap: what 100 trials showed, at under a third of the
// cost.
const ciTrials = 30

// ciOptions are the CI run's, on dsn.
func ciOptions(t *testing.T, dsn string) Options {
	return Options{DSN: dsn, Trials: ciTrials, Seed: 1, Parallel: 3, Worker: testWorker(t)}
}

// ciReports are the reports of the CI run, made twice at once on one
// database (two run ids, their own scratch schemas and Redis servers), once
// TestLabShowsEveryAnomaly has made them: TestLabIsReproducible compares the
// two rather than making runs of its own. At once, not one after the other:
// a run spends much of its time waiting (worker processes starting, kills,
// polls), and two at once overlap their waits.
var ciReports [2]*Report

// runCITwice makes the CI run twice at once on dsn and returns both reports.
func runCITwice(t *testing.T, dsn string) [2]*Report {
	t.Helper()
	var reps [2]*Report
	var progress [2]lockedbuf.Buffer
	var errs [2]error
	var wg sync.WaitGroup
	start := time.Now()
	for i := range reps {
		opts := ciOptions(t, dsn)
		opts.Progress = &progress[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			reps[i], errs[i] = Run(context.Background(), opts)
		}()
	}
	wg.Wait()
	for i := range reps {
		require.NoError(t, errs[i], progress[i].String())
		t.Logf("run %d: %d trials x %d designs, both runs in %s\n%s", i+1, ciTrials, len(reps[i].Designs),
			time.Since(start).Round(time.Millisecond), progress[i].String())
	}
	return reps
}

// TestLabShowsEveryAnomaly is the CI run, in which the atomic executor must
// show nothing and every broken design its own anomaly, in each of its two
// runs.
func TestLabShowsEveryAnomaly(t *testing.T) {
	// Not parallel: the two runs use more than 30 connections.
	dsn := dbtest.NewDatabase(t)
	conn := connect(t, dsn)
	reps := runCITwice(t, dsn)
	ciReports = reps
	for i, rep := range reps {
		require.Len(t, rep.Designs, len(DesignNames()))
		for _, d := range rep.Designs {
			t.Logf("run %d: %-26s operations=%d lost=%d doubled=%d wrong_response=%d missed_conflicts=%d false_conflicts=%d lost_revisions=%d kills=%+v",
				i+1, d.Design, d.Operations, d.Lost, d.Doubled, d.WrongResponse, d.MissedConflicts, d.FalseConflicts, d.LostRevisions, d.Kills)
			assertDesignShows(t, d)
		}
	}
	assert.Empty(t, scratchSchemas(t, conn), "scratch schemas are dropped")
	// The real schemas are untouched.
	for _, q := range []string{"SELECT count(*) FROM idem.inbox", "SELECT count(*) FROM idem.quarantine", "SELECT count(*) FROM demo.posting"} {
		var n int
		require.NoError(t, conn.QueryRow(context.Background(), q).Scan(&n))
		assert.Zero(t, n, q)
	}
}

// assertDesignShows checks one design's line of a CI run: every first attempt
// killed, at six kill points or more, races that overlapped, and the anomalies
// the design exists to show (none for atomic and a rebuilt projection).
func assertDesignShows(t *testing.T, d DesignReport) {
	t.Helper()
	assert.Equal(t, ciTrials, d.Trials)
	assert.Greater(t, d.Operations, 2*ciTrials, "first attempts, retries and extras")
	killed := 0
	for _, k := range d.Kills {
		killed += k.Count
		assert.Zero(t, k.Unconfirmed, "%s: kill at %s not confirmed server-side", d.Design, k.Step)
	}
	assert.Equal(t, ciTrials, killed, "%s: every trial's first attempt is killed", d.Design)
	assert.GreaterOrEqual(t, len(d.Kills), 6, "%s: at least six distinct kill points", d.Design)
	assert.Positive(t, d.Races, "%s: concurrent duplicates", d.Design)
	assert.Positive(t, d.RacesOverlapped, "%s: a concurrent duplicate seen blocked on the other", d.Design)
	switch d.Design {
	case "atomic":
		for _, col := range AnomalyColumns {
			assert.Zero(t, d.Count(col), "atomic %s", col)
		}
		return
	case "projection_rebuild":
		// Doubled by the late replays, right once rebuilt.
		require.NotNil(t, d.DoubledBeforeRebuild)
		assert.Positive(t, *d.DoubledBeforeRebuild, "projection doubled before its rebuild")
		for _, col := range AnomalyColumns {
			assert.Zero(t, d.Count(col), "rebuilt projection %s", col)
		}
		return
	}
	require.NotEmpty(t, d.Expected, d.Design)
	for _, col := range d.Expected {
		assert.Positive(t, d.Count(col), "%s must show %s", d.Design, col)
	}
}

// TestLabIsReproducible compares two runs of the same seed: apart from kill
// timings, the counts must be the same (the races run in a fixed
// interleaving), although the two runs went at once, their timings mixed.
// The runs are the CI run's when TestLabShowsEveryAnomaly made them.
func TestLabIsReproducible(t *testing.T) {
	counts := func(rep *Report) [][]int {
		var out [][]int
		for _, d := range rep.Designs {
			row := []int{d.Operations, d.Races, d.Trials, d.Identities}
			for _, col := range AnomalyColumns {
				row = append(row, d.Count(col))
			}
			if d.DoubledBeforeRebuild != nil {
				row = append(row, *d.DoubledBeforeRebuild)
			}
			out = append(out, row)
		}
		return out
	}
	reps := ciReports
	if reps[0] == nil {
		reps = runCITwice(t, dbtest.NewDatabase(t))
	}
	require.Len(t, reps[0].Designs, len(DesignNames()))
	require.Len(t, reps[1].Designs, len(DesignNames()))
	assert.NotEqual(t, reps[0].RunID, reps[1].RunID, "two runs")
	assert.Equal(t, counts(reps[0]), counts(reps[1]))
}

// TestLabCancelledDropsSchemas cancels a run in the middle of its crash phase.
func TestLabCancelledDropsSchemas(t *testing.T) {
	dsn := dbtest.NewDatabase(t)
	conn := connect(t, dsn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr := &cancelAfter{needle: "crash trials killed", cancel: cancel}
	_, err := Run(ctx, Options{DSN: dsn, Trials: 10, Seed: 2, Parallel: 2, Worker: testWorker(t), Progress: pr})
	require.ErrorIs(t, err, context.Canceled)
	assert.Empty(t, scratchSchemas(t, conn))
}

// cancelAfter cancels the run when a progress line contains needle.
type cancelAfter struct {
	needle string
	cancel func()
}

func (c *cancelAfter) Write(p []byte) (int, error) {
	if strings.Contains(string(p), c.needle) {
		c.cancel()
	}
	return len(p), nil
}

// interruptibleRun is the interruption test's child: a long lab run that stops
// on SIGINT the way idemctl does (context cancellation).
func interruptibleRun(dsn string) int {
	ctx, stop := signalContext()
	defer stop()
	exe, _ := os.Executable()
	_, err := Run(ctx, Options{DSN: dsn, Trials: 5000, Seed: 3, Parallel: 2,
		Worker: WorkerCommand{Path: exe, Env: []string{WorkerEnv + "=1", runEnv + "="}}, Progress: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, "lab run:", err)
		return 1
	}
	return 0
}

func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// TestLabInterruptedBySignal SIGINTs a lab process in the middle of a run and
// checks that it leaves no scratch schema behind.
func TestLabInterruptedBySignal(t *testing.T) {
	dsn := dbtest.NewDatabase(t)
	conn := connect(t, dsn)
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), runEnv+"="+dsn)
	var stderr lockedbuf.Buffer // written by exec's copying goroutine while the test reads it
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	// Wait until the schemas exist and workers are being killed.
	deadline := time.Now().Add(30 * time.Second)
	for len(scratchSchemas(t, conn)) < len(DesignNames()) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	require.Len(t, scratchSchemas(t, conn), len(DesignNames()), stderr.String())
	time.Sleep(1500 * time.Millisecond)
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	err = cmd.Wait()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "interrupted run must fail: %s", stderr.String())
	assert.Contains(t, stderr.String(), "context canceled")
	assert.Empty(t, scratchSchemas(t, conn), stderr.String())
	var workers int
	require.NoError(t, conn.QueryRow(context.Background(),
		"SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'idemctl-lab-worker-%' AND datname = current_database()").Scan(&workers))
	assert.Zero(t, workers, "no worker backend left")
}

// TestStaleSchemasOfDeadRunsAreDropped plants the schema of a run whose process
// is gone, and one of a live process, and checks a new run drops only the first.
func TestStaleSchemasOfDeadRunsAreDropped(t *testing.T) {
	t.Parallel()
	dsn := dbtest.NewDatabase(t)
	conn := connect(t, dsn)
	ctx := context.Background()
	// A pid that is certainly gone: a child that has exited and been reaped.
	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	now := time.Now()
	host, _ := os.Hostname()
	require.NoError(t, createSchema(ctx, conn, "idemlab_dead0000_atomic", owner{Run: "dead0000", PID: dead.Process.Pid, Host: host, Started: now}))
	require.NoError(t, createSchema(ctx, conn, "idemlab_live0000_atomic", owner{Run: "live0000", PID: os.Getpid(), Host: host, Started: now}))
	require.NoError(t, createSchema(ctx, conn, "idemlab_old00000_atomic", owner{Run: "old00000", PID: 1, Host: "elsewhere", Started: now.Add(-48 * time.Hour)}))
	require.NoError(t, createSchema(ctx, conn, "idemlab_far00000_atomic", owner{Run: "far00000", PID: 1, Host: "elsewhere", Started: now}))

	dropped, err := dropStale(ctx, conn, now)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"idemlab_dead0000_atomic", "idemlab_old00000_atomic"}, dropped)
	assert.Equal(t, []string{"idemlab_far00000_atomic", "idemlab_live0000_atomic"}, scratchSchemas(t, conn))
}

func TestQualify(t *testing.T) {
	t.Parallel()
	const s = "idemlab_0a1b2c3d_atomic"
	cases := []struct{ in, want string }{
		{"CREATE SCHEMA IF NOT EXISTS idem;", "CREATE SCHEMA IF NOT EXISTS " + s + ";"},
		{"CREATE SCHEMA IF NOT EXISTS demo;", "CREATE SCHEMA IF NOT EXISTS " + s + ";"},
		{"SELECT * FROM idem.inbox i JOIN demo.posting p", "SELECT * FROM " + s + ".inbox i JOIN " + s + ".posting p"},
		{"'demo.transfer_effect(text,text,jsonb)'::regprocedure", "'" + s + ".transfer_effect(text,text,jsonb)'::regprocedure"},
		{"v_row idem.inbox;", "v_row " + s + ".inbox;"},
		{"(idem.x)", "(" + s + ".x)"},
		{"scratch.marker", s + ".marker"},
		{"pseudo.idem_x, idemctl hash", "pseudo.idem_x, idemctl hash"},
		{"WHERE nspname = 'idem'", "WHERE nspname = '" + s + "'"},
		{"-- the idem schema\nSELECT 1", "-- the idem schema\nSELECT 1"},
		{"SET search_path = pg_catalog, idem, pg_temp", "SET search_path = pg_catalog, " + s + ", pg_temp"},
		{"SET search_path = pg_catalog, demo, pg_temp", "SET search_path = pg_catalog, " + s + ", pg_temp"},
	}
	for _, c := range cases {
		got, err := qualify(c.in, s)
		require.NoError(t, err, c.in)
		assert.Equal(t, c.want, got, c.in)
	}
	for _, bad := range []string{
		"SET search_path = idem",
		`SELECT * FROM "idem".inbox`,
		"GRANT USAGE ON SCHEMA public, idem TO x",
		"SELECT a.demo.b",
	} {
		_, err := qualify(bad, s)
		assert.Error(t, err, bad)
	}
	_, err := qualify("SELECT 1", "idem")
	assert.Error(t, err, "only lab schemas")
}

// TestEveryMigrationInstallsIntoAScratchSchema guards the lab against a new
// migration that names schema idem in a way qualify cannot rewrite. It also
// checks that what a design installs is qualify's work for its schema: the
// Core's SQL, qualified once for a placeholder and then given the schema,
// part by part; the ledger alone for a design off the Core.
func TestEveryMigrationInstallsIntoAScratchSchema(t *testing.T) {
	t.Parallel()
	all, err := executorSQL()
	require.NoError(t, err)
	want := map[string][]namedSQL{}
	for _, schema := range []string{"idemlab_0a1b2c3d_uuid_per_retry"} {
		for _, m := range all {
			sql, err := qualify(m.sql, schema)
			assert.NoError(t, err, m.name)
			want[schema] = append(want[schema], namedSQL{m.name, sql})
		}
	}
	for _, d := range designs {
		schema := schemaName("00000000", d.Name)
		_, err := designStatements(d, schema)
		assert.NoError(t, err, d.Name)
		got, err := designSQL(d, schema)
		require.NoError(t, err, d.Name)
		if !d.core {
			ledger, err := qualify(ledgerSQL, schema)
			require.NoError(t, err)
			assert.Equal(t, []namedSQL{{"ledger", ledger}}, got, d.Name)
		}
	}
	for schema, parts := range want {
		got, err := designSQL(designs[len(designs)-1], schema)
		require.NoError(t, err)
		require.Len(t, got, len(parts))
		for i, p := range parts {
			assert.Equal(t, p, got[i], "%s: %s", schema, p.name)
			assert.NotContains(t, got[i].sql, corePlaceholder)
		}
	}
	require.True(t, designs[len(designs)-1].core, "the last design is atomic")
	_, err = designSQL(designs[len(designs)-1], "idem")
	assert.Error(t, err, "only lab schemas")
}

// TestOnlyCoreDesignsGetTheCore: a design's scratch schema holds the Core
// executor only when it calls it (core). Every object a design's statements
// name is the ledger's, its own (its schema statement) or, for a design on
// the Core, the Core's; a design on the Core names one of the Core's.
func TestOnlyCoreDesignsGetTheCore(t *testing.T) {
	t.Parallel()
	const schema = "idemlab_00000000_x"
	refRE := regexp.MustCompile(regexp.QuoteMeta(schema) + `\.([a-z_][a-z0-9_]*)`)
	names := func(sql string) map[string]bool {
		out := map[string]bool{}
		for _, m := range refRE.FindAllStringSubmatch(sql, -1) {
			out[m[1]] = true
		}
		return out
	}
	ledger, err := qualify(ledgerSQL, schema)
	require.NoError(t, err)
	core := map[string]bool{}
	parts, err := designSQL(design{core: true}, schema)
	require.NoError(t, err)
	for _, p := range parts {
		if p.name != "ledger" {
			for n := range names(p.sql) {
				core[n] = true
			}
		}
	}
	require.True(t, core["execute"] && core["inbox_body"], "the Core's names are found")
	for _, d := range designs {
		q, err := designStatements(d, schema)
		require.NoError(t, err, d.Name)
		own := names(ledger)
		for n := range names(q["schema"]) {
			own[n] = true
		}
		namesCore := false
		for k, sql := range q {
			for n := range names(sql) {
				switch {
				case own[n]:
				case core[n] && d.core:
					namesCore = true
				default:
					t.Errorf("%s: statement %s names %s.%s, which its scratch schema does not hold (core %v)", d.Name, k, schema, n, d.core)
				}
			}
		}
		assert.Equal(t, d.core, namesCore, "%s: core is set exactly when the design calls the Core", d.Name)
	}
}

func TestWorkloadIsReproducible(t *testing.T) {
	t.Parallel()
	a, b := NewWorkload(42, 200), NewWorkload(42, 200)
	assert.Equal(t, a, b)
	assert.NotEqual(t, a, NewWorkload(43, 200))
	seen := map[string]int{}
	for _, tr := range a {
		for name, on := range map[string]bool{
			"duplicate": tr.Duplicate, "concurrent": tr.Concurrent, "concurrent other": tr.Concurrent && tr.ConcurrentOther,
			"conflicting": tr.Conflicting, "late": tr.LateReplay, "retry times out": tr.RetryTimesOut, "resent": tr.Resent,
			"republished": tr.Republished, "other tenant": tr.TwinTenant != "", "revision": tr.Revision,
		} {
			if on {
				seen[name]++
			}
		}
		assert.NotEqual(t, tr.Tenant, tr.TwinTenant, "the other tenant is another tenant")
	}
	assert.Len(t, seen, 10, "every situation occurs: %v", seen)
}

func TestKillStepsCoverEveryStep(t *testing.T) {
	t.Parallel()
	for _, d := range designs {
		seen := map[string]bool{}
		for _, tr := range NewWorkload(7, 400) {
			seen[d.killStep(tr)] = true
		}
		want := map[string]bool{}
		for _, tr := range []Trial{{ClaimPath: false}, {ClaimPath: true}} {
			for _, s := range d.steps(tr) {
				want[s] = true
			}
		}
		assert.Equal(t, want, seen, d.Name)
		assert.GreaterOrEqual(t, len(seen), 6, d.Name)
	}
}

func TestRunRejectsUnknownDesign(t *testing.T) {
	t.Parallel()
	_, err := Run(context.Background(), Options{Designs: []string{"atomic", "nope"}})
	require.ErrorIs(t, err, ErrUnknownDesign)
}
