// Package lab is idemctl's crash lab: it runs the broken idempotency designs of
// the brief (marker in its own transaction, effect before marker, inbox TTL
// shorter than the replay horizon, payload check apart from the insert), the
// field's other classic mistakes (a global key, a new key per retry, raw JSON
// compared, a Redis marker, transport identity, revisions as duplicates), a
// rebuildable projection and the Core's atomic executor through one shared
// workload, kills real worker processes with SIGKILL inside their
// transactions, replays as a recovering system would, and counts what each
// design lost, doubled or answered wrongly.
//
// Everything happens in scratch schemas (idemlab_<run>_<design>) that the lab
// creates and drops itself, and in a Redis server of its own that it starts,
// restarts and stops; schema idem, every other schema and every other Redis
// are untouched.
package lab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/idemctl/idemctl/internal/db"
)

// Defaults and bounds of a run.
const (
	DefaultTrials   = 100
	DefaultParallel = 4
	MaxTrials       = 100_000
	MaxParallel     = 16
	// lateReplayAfter is how far the simulated clock jumps before the DLQ
	// replays: past ttl_shorter_than_horizon's 24 h TTL, within a 14-day DLQ.
	lateReplayAfter = "7 days"
	maxAttempts     = 5
)

// Options configure a run.
type Options struct {
	// DSN of the database the scratch schemas go into ("" means the PG* environment).
	DSN string
	// Trials is the number of crash trials per design.
	Trials int
	// Seed makes the workload reproducible.
	Seed uint64
	// Designs to run, by name; empty means all, in DesignNames order.
	Designs []string
	// Parallel bounds the trials in flight (worker processes, or replays).
	Parallel int
	// Worker starts a worker process; zero means DefaultWorkerCommand.
	Worker WorkerCommand
	// Progress receives one line per phase (nil: discarded).
	Progress io.Writer
	// Now is the clock for stale-schema decisions (nil: time.Now).
	Now func() time.Time
	// RedisServer is the redis-server binary redis_inbox starts ("": found
	// in PATH).
	RedisServer string
}

// Report is the result of a run.
type Report struct {
	RunID   string         `json:"run"`
	Seed    uint64         `json:"seed"`
	Trials  int            `json:"trials"`
	Designs []DesignReport `json:"designs"`
	// DroppedStale lists leftover schemas of dead runs dropped at start.
	DroppedStale []string `json:"dropped_stale,omitempty"`
}

// DesignReport is one design's line of the result.
type DesignReport struct {
	Design string `json:"design"`
	// Operations counts the requests delivered: first attempts, recovery
	// retries, duplicates, concurrent duplicates, conflicting retries,
	// re-sent and republished commands, other tenants' commands, revisions,
	// late replays.
	Operations int `json:"operations"`
	// Lost and Doubled count business operations (identities) that ended with
	// no posting, or with more than one.
	Lost    int `json:"lost"`
	Doubled int `json:"doubled"`
	// WrongResponse counts success replies that carried another command's
	// result (a posting of another amount, or one of another operation).
	WrongResponse int `json:"wrong_response"`
	// MissedConflicts counts requests whose payload differs from the one the
	// identity was applied with, and that were not answered "conflict".
	MissedConflicts int `json:"missed_conflicts"`
	// FalseConflicts counts requests with the very payload the identity was
	// applied with that were refused as "conflict".
	FalseConflicts int `json:"false_conflicts"`
	// LostRevisions counts settlement revisions that were never posted.
	LostRevisions int `json:"lost_revisions"`
	// DoubledBeforeRebuild is, for a rebuildable projection, the doubled
	// count before the rebuild (the final columns are after it).
	DoubledBeforeRebuild *int `json:"doubled_before_rebuild,omitempty"`
	Trials               int  `json:"trials"`
	// Identities is the number of business operations: one per trial, plus
	// other tenants' operations with the same id, plus revisions.
	Identities int    `json:"identities"`
	Seed       uint64 `json:"seed"`
	RunID      string `json:"run"`
	// Expected lists the anomaly columns the design exists to show (none for
	// atomic and for a rebuilt projection).
	Expected []string `json:"expected_anomalies,omitempty"`
	// Does says what the design does; Summary what goes wrong.
	Does    string `json:"does"`
	Summary string `json:"summary"`
	// Races counts the concurrent duplicates; RacesOverlapped those in which
	// the second request was seen blocked on the first one's uncommitted write
	// (or, for a marker outside PostgreSQL, answered while the first was
	// still in flight).
	Races           int `json:"concurrent_races"`
	RacesOverlapped int `json:"races_overlapped"`
	// Kills summarises the SIGKILLs per step, with their timings.
	Kills []KillSummary `json:"kills"`
	// Examples names a few operations behind each anomaly, to explain a run.
	Examples   []Example `json:"examples,omitempty"`
	DurationMS int64     `json:"duration_ms"`
}

// Anomalies is the sum of the anomaly columns.
func (r DesignReport) Anomalies() int {
	n := 0
	for _, c := range AnomalyColumns {
		n += r.Count(c)
	}
	return n
}

// Count returns one anomaly column by name.
func (r DesignReport) Count(anomaly string) int {
	switch anomaly {
	case AnomalyLost:
		return r.Lost
	case AnomalyDoubled:
		return r.Doubled
	case AnomalyWrongResponse:
		return r.WrongResponse
	case AnomalyMissedConflicts:
		return r.MissedConflicts
	case AnomalyFalseConflicts:
		return r.FalseConflicts
	case AnomalyLostRevisions:
		return r.LostRevisions
	}
	return 0
}

// KillSummary is the kills at one step: how many, and when they struck
// (milliseconds from the worker's start).
type KillSummary struct {
	Step        string `json:"step"`
	Count       int    `json:"count"`
	Unconfirmed int    `json:"unconfirmed,omitempty"`
	MinMS       int64  `json:"ms_min"`
	MedianMS    int64  `json:"ms_median"`
	MaxMS       int64  `json:"ms_max"`
}

// Example is one operation behind an anomaly.
type Example struct {
	Anomaly   string `json:"anomaly"`
	Operation string `json:"operation"`
	Kill      string `json:"kill"`
	Detail    string `json:"detail"`
}

// ErrNoDesigns is returned when the design list selects nothing.
var ErrNoDesigns = errors.New("no designs to run")

// runner is one run's shared state.
type runner struct {
	opts   Options
	runID  string
	worker WorkerCommand
	pool   *pgxpool.Pool
	out    io.Writer
}

// designState is one design within a run.
type designState struct {
	d      design
	schema string
	q      statements
	// redis is the design's own Redis server, rc the parent's client of it.
	redis *redisServer
	rc    *redisClient
}

// Run runs the lab and returns its report. Scratch schemas are dropped before
// it returns, also when ctx is cancelled or a step fails.
func Run(ctx context.Context, opts Options) (*Report, error) {
	if err := opts.withDefaults(); err != nil {
		return nil, err
	}
	ds, err := selectDesigns(opts)
	if err != nil {
		return nil, err
	}
	worker := opts.Worker
	if worker.Path == "" {
		w, err := DefaultWorkerCommand()
		if err != nil {
			return nil, err
		}
		worker = w
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	r := &runner{opts: opts, runID: hex.EncodeToString(b[:]), worker: worker, out: opts.Progress}
	if r.out == nil {
		r.out = io.Discard
	}
	report := &Report{RunID: r.runID, Seed: opts.Seed, Trials: opts.Trials}

	admin, err := db.Connect(ctx, opts.DSN, db.Options{})
	if err != nil {
		return nil, err
	}
	defer admin.Close(context.Background())
	if report.DroppedStale, err = dropStale(ctx, admin, opts.Now()); err != nil {
		return nil, err
	}
	for _, s := range report.DroppedStale {
		r.progress("dropped leftover scratch schema %s (its run is gone)", s)
	}

	var created []string
	defer func() {
		// A fresh connection: admin dies with the run's context when an
		// interruption cancels a query running on it.
		cleanup := admin
		if fresh, err := db.Connect(context.Background(), opts.DSN, db.Options{}); err == nil {
			defer fresh.Close(context.Background())
			cleanup = fresh
		}
		// Workers are all dead by now (every crash waits for its worker), so
		// only their backends can linger: end them, then drop.
		terminateWorkers(cleanup, r.runID)
		if err := dropSchemas(cleanup, created); err != nil {
			r.progress("warning: %v", err)
		} else if len(created) > 0 {
			r.progress("dropped %d scratch schema(s)", len(created))
		}
	}()
	started := opts.Now()
	for _, s := range ds {
		s.schema = schemaName(r.runID, s.d.Name)
		// Listed before it exists: an interruption between CREATE and COMMENT
		// must not leave it behind.
		created = append(created, s.schema)
		if err := createSchema(ctx, admin, s.schema, currentOwner(r.runID, started)); err != nil {
			return nil, err
		}
	}

	workload := NewWorkload(opts.Seed, opts.Trials)
	for _, s := range ds {
		rep, err := r.runDesign(ctx, admin, s, workload)
		if ctx.Err() != nil {
			// Whatever failed first, the cause is the interruption.
			return nil, fmt.Errorf("lab interrupted during design %s: %w", s.d.Name, ctx.Err())
		}
		if err != nil {
			return nil, fmt.Errorf("design %s: %w", s.d.Name, err)
		}
		report.Designs = append(report.Designs, rep)
	}
	return report, nil
}

// withDefaults fills in what opts leaves out and bounds the rest.
func (opts *Options) withDefaults() error {
	if opts.Trials <= 0 {
		opts.Trials = DefaultTrials
	}
	if opts.Trials > MaxTrials {
		return fmt.Errorf("at most %d trials", MaxTrials)
	}
	if opts.Parallel <= 0 {
		opts.Parallel = DefaultParallel
	}
	if opts.Parallel > MaxParallel {
		opts.Parallel = MaxParallel
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return nil
}

// selectDesigns resolves the run's designs, in order, once each, and checks
// that what they need is there.
func selectDesigns(opts Options) ([]*designState, error) {
	names := opts.Designs
	if len(names) == 0 {
		names = DesignNames()
	}
	var ds []*designState
	seen := map[string]bool{}
	for _, n := range names {
		d, err := designByName(n)
		if err != nil {
			return nil, err
		}
		if !seen[n] {
			seen[n] = true
			ds = append(ds, &designState{d: d})
		}
	}
	if len(ds) == 0 {
		return nil, ErrNoDesigns
	}
	if err := checkRedisServer(ds, opts.RedisServer); err != nil {
		return nil, err
	}
	return ds, nil
}

func (r *runner) progress(format string, args ...any) {
	fmt.Fprintf(r.out, "lab: "+format+"\n", args...)
}

// openPool opens the parent's connections: three per trial in flight (a race
// uses two and polls with a third; a crash trial holds an account with one and
// polls with another).
func (r *runner) openPool(ctx context.Context) (*pgxpool.Pool, error) {
	cfg, err := db.Config(r.opts.DSN, db.Options{MaxConns: int32(3*r.opts.Parallel + 2)})
	if err != nil {
		return nil, err
	}
	rp := cfg.ConnConfig.RuntimeParams
	rp["application_name"] = "idemctl-lab-" + r.runID
	rp["lock_timeout"] = "10s"
	rp["statement_timeout"] = "30s"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("%w at %s", db.ErrConnect, db.Describe(r.opts.DSN))
	}
	return pool, nil
}

// deliver runs one delivery in process on a fresh pooled connection, retrying
// what a recovering system retries (lock and statement timeouts, deadlocks,
// serialization failures, an unsettled identity).
func (r *runner) deliver(ctx context.Context, s *designState, d delivery, at stepHook) (Reply, error) {
	var last error
	for attempt := 0; attempt < maxAttempts; attempt++ {
		c, err := r.pool.Acquire(ctx)
		if err != nil {
			return Reply{}, err
		}
		sess := &session{conn: c.Conn(), q: s.q, at: at, effectStmt: s.d.effect, redis: s.rc}
		rep, err := s.d.run(ctx, sess, d)
		c.Release()
		if err == nil {
			return rep, nil
		}
		if !transient(err) || ctx.Err() != nil {
			return Reply{}, fmt.Errorf("%s of %s/%s: %w", d.Kind, d.Tenant, d.OperationID, err)
		}
		last = err
		at = nil // a retried racer does not wait at the barrier again
		time.Sleep(time.Duration(20*(attempt+1)) * time.Millisecond)
	}
	return Reply{}, fmt.Errorf("%s of %s/%s: gave up after %d attempts: %w", d.Kind, d.Tenant, d.OperationID, maxAttempts, last)
}

func transient(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case "55P03", "57014", "40P01", "40001", "IX007":
		return true
	}
	return false
}

// race delivers a and b at once on two connections, in a fixed interleaving so
// that the run is reproducible: both stop at the design's race step (neither
// has written anything yet); then a goes on, and b follows as soon as a has
// written its row or its effect, not committed. a waits until the server shows
// b blocked on it, so the two really overlap, exactly where the design is
// weak; a always wins. It reports whether the overlap was seen.
func (r *runner) race(ctx context.Context, s *designState, a, b delivery) ([2]Reply, bool, error) {
	var replies [2]Reply
	goA, goB, bDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	arrived := 0
	arrive := func() {
		mu.Lock()
		defer mu.Unlock()
		arrived++
		if arrived == 2 {
			close(goA)
		}
	}
	var releaseB sync.Once
	var bPID atomic.Uint32
	overlapped := false
	wait := func(ctx context.Context, ch chan struct{}) error {
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	for i, d := range []delivery{a, b} {
		g.Go(func() error {
			var once sync.Once
			done := func() { once.Do(arrive) }
			defer done() // a racer that never reaches the race step must not block the other
			if i == 0 {
				defer releaseB.Do(func() { close(goB) })
			} else {
				defer close(bDone)
			}
			passed := false
			at := func(ctx context.Context, sess *session, step string) error {
				switch {
				case step == s.d.raceStep:
					done()
					passed = true
					if i == 0 {
						return wait(ctx, goA)
					}
					bPID.Store(sess.conn.PgConn().PID())
					return wait(ctx, goB)
				case i == 0 && passed && raceReleaseSteps[step]:
					released := false
					releaseB.Do(func() { close(goB); released = true })
					if released {
						overlapped = r.waitOverlap(ctx, s.d.raceAnswered, bPID.Load(), bDone)
					}
				}
				return nil
			}
			rep, err := r.deliver(gctx, s, d, at)
			if err != nil {
				return err
			}
			replies[i] = rep
			return nil
		})
	}
	err := g.Wait()
	return replies, overlapped, err
}

// waitOverlap waits, for at most 2 s, until the second racer is seen to
// overlap the first: blocked on a lock (backend pid), or, for a design whose
// marker lives outside PostgreSQL (answered), answered (done is closed). It
// reports whether it saw the overlap.
func (r *runner) waitOverlap(ctx context.Context, answered bool, pid uint32, done <-chan struct{}) bool {
	if answered {
		select {
		case <-done:
			return true
		case <-time.After(2 * time.Second):
			return false
		case <-ctx.Done():
			return false
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		select {
		case <-done:
			return false
		default:
		}
		var ok bool
		err := r.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock')", int64(pid)).Scan(&ok)
		if err == nil && ok {
			return true
		}
		time.Sleep(time.Millisecond)
	}
	return false
}

// raceReleaseSteps are the steps at which the first racer has written its
// marker, inbox row or effect and not committed it: the second racer goes then.
var raceReleaseSteps = map[string]bool{StepAfterMarker: true, StepAfterEffect: true, StepBeforeCommit: true}

// forEach runs fn(0..n-1) with at most parallel in flight; the first error
// cancels the rest.
func forEach(ctx context.Context, parallel, n int, fn func(context.Context, int) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	for i := 0; i < n; i++ {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error { return fn(gctx, i) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}

// terminateWorkers ends the backends of this run's workers that are still
// there (a fresh context: it runs during cleanup).
func terminateWorkers(conn *pgx.Conn, runID string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = conn.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
		workerAppPrefix+runID)
}

func summariseKills(kills []*killRecord) []KillSummary {
	by := map[string][]*killRecord{}
	for _, k := range kills {
		if k != nil {
			by[k.Step] = append(by[k.Step], k)
		}
	}
	out := make([]KillSummary, 0, len(by))
	for step, ks := range by {
		ms := make([]int64, len(ks))
		s := KillSummary{Step: step, Count: len(ks)}
		for i, k := range ks {
			ms[i] = k.Elapsed.Milliseconds()
			if !k.Confirmed {
				s.Unconfirmed++
			}
		}
		sort.Slice(ms, func(i, j int) bool { return ms[i] < ms[j] })
		s.MinMS, s.MedianMS, s.MaxMS = ms[0], ms[len(ms)/2], ms[len(ms)-1]
		out = append(out, s)
	}
	order := map[string]int{}
	for i, st := range []string{StepBeforeCall, StepAfterBegin, StepAfterCheck, StepAfterMarker, StepMarkerCommitted,
		StepDuringEffect, StepAfterEffect, StepEffectCommitted, StepBeforeCommit, StepCommitSent, StepBeforeReport} {
		order[st] = i
	}
	sort.Slice(out, func(i, j int) bool { return order[out[i].Step] < order[out[j].Step] })
	return out
}
