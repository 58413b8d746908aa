package lab

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// designRun is one design's pass through the workload: what every delivery
// of every trial was answered, and how each first attempt died.
type designRun struct {
	r        *runner
	s        *designState
	workload []Trial
	// log holds the deliveries of every trial: index 0 is the first attempt.
	log   [][]deliveryResult
	logMu sync.Mutex
	kills []*killRecord
	races atomic.Int64
	// overlaps counts the races whose second request was seen overlapping.
	overlaps atomic.Int64
}

func (run *designRun) record(i int, d delivery, rep *Reply) {
	run.logMu.Lock()
	run.log[i] = append(run.log[i], deliveryResult{d: d, reply: rep})
	run.logMu.Unlock()
}

// runDesign installs one design, crashes its first attempts, reopens the
// database, recovers, redelivers, replays late, and judges the result.
func (r *runner) runDesign(ctx context.Context, admin *pgx.Conn, s *designState, workload []Trial) (DesignReport, error) {
	start := time.Now()
	if err := r.install(ctx, admin, s, workload); err != nil {
		return DesignReport{}, err
	}
	if s.d.redisFile != "" {
		stop, err := r.startRedis(ctx, s)
		if err != nil {
			return DesignReport{}, err
		}
		defer stop()
	}
	run := &designRun{r: r, s: s, workload: workload,
		log: make([][]deliveryResult, len(workload)), kills: make([]*killRecord, len(workload))}
	if err := run.crashAll(ctx, admin); err != nil {
		return DesignReport{}, err
	}
	r.progress("%s: %d crash trials killed in %s", s.d.Name, countKills(run.kills), time.Since(start).Round(time.Millisecond))
	var err error
	if r.pool, err = r.openPool(ctx); err != nil {
		return DesignReport{}, err
	}
	defer r.pool.Close()
	if err := run.forEachTrial(ctx, run.recoverTrial); err != nil {
		return DesignReport{}, err
	}
	if s.redis != nil {
		if err := r.crashRedis(ctx, s); err != nil {
			return DesignReport{}, err
		}
	}
	if err := run.forEachTrial(ctx, func(ctx context.Context, i int) error {
		return run.deliverKinds(ctx, i, workload[i].redeliveryKinds()...)
	}); err != nil {
		return DesignReport{}, err
	}
	if err := run.replayLate(ctx); err != nil {
		return DesignReport{}, err
	}
	rep, err := run.verdict(ctx)
	if err != nil {
		return DesignReport{}, err
	}
	rep.DurationMS = time.Since(start).Milliseconds()
	r.progress("%s: done in %s (lost %d, doubled %d, wrong_response %d, missed_conflicts %d, false_conflicts %d, lost_revisions %d)",
		s.d.Name, time.Since(start).Round(time.Millisecond), rep.Lost, rep.Doubled, rep.WrongResponse,
		rep.MissedConflicts, rep.FalseConflicts, rep.LostRevisions)
	return rep, nil
}

// install puts the ledger (and, for a design on the Core, the Core executor),
// the design's own tables, every trial's accounts and, for a projection, its
// source into the scratch schema.
func (r *runner) install(ctx context.Context, admin *pgx.Conn, s *designState, workload []Trial) error {
	var err error
	if s.q, err = designStatements(s.d, s.schema); err != nil {
		return err
	}
	if err := installDesign(ctx, admin, s.d, s.schema); err != nil {
		return err
	}
	if sql, ok := s.q["schema"]; ok {
		if _, err := admin.Exec(ctx, sql); err != nil {
			return fmt.Errorf("install design tables: %w", err)
		}
	}
	var tenants, accounts []string
	for _, t := range workload {
		for _, k := range t.operationKinds() {
			id := identityOf(t, k)
			tenants = append(tenants, id.tenant, id.tenant)
			accounts = append(accounts, t.From, t.To)
		}
	}
	if _, err := admin.Exec(ctx, s.q["create_accounts"], tenants, accounts); err != nil {
		return fmt.Errorf("create accounts: %w", err)
	}
	if s.d.publish == "" {
		return nil
	}
	return publishOperations(ctx, admin, s.q[s.d.publish], workload)
}

// publishOperations writes every business operation of the workload, once,
// into the source a projection is rebuilt from.
func publishOperations(ctx context.Context, admin *pgx.Conn, sql string, workload []Trial) error {
	var tenants, ops, payloads []string
	for _, t := range workload {
		for _, k := range t.operationKinds() {
			d, err := deliveryOf(t, k)
			if err != nil {
				return err
			}
			tenants, ops, payloads = append(tenants, d.Tenant), append(ops, d.OperationID), append(payloads, d.Payload)
		}
	}
	if _, err := admin.Exec(ctx, sql, tenants, ops, payloads); err != nil {
		return fmt.Errorf("publish the projection's source: %w", err)
	}
	return nil
}

// crashAll runs every first attempt in a worker process and kills it, then
// "reopens": waits until the server has ended every killed worker's backend
// (rolling back what was open). A Redis design's server then snapshots.
func (run *designRun) crashAll(ctx context.Context, admin *pgx.Conn) error {
	r, s := run.r, run.s
	var err error
	if r.pool, err = r.openPool(ctx); err != nil {
		return err
	}
	defer r.pool.Close()
	err = run.forEachTrial(ctx, func(ctx context.Context, i int) error {
		t := run.workload[i]
		d, err := deliveryOf(t, KindFirst)
		if err != nil {
			return err
		}
		res, err := r.crash(ctx, s, t, d)
		if err != nil {
			return err
		}
		run.kills[i] = res.kill
		run.record(i, d, res.reply)
		return nil
	})
	if err != nil {
		return err
	}
	var backends []uint32
	for _, k := range run.kills {
		if k != nil {
			backends = append(backends, k.BackendPID)
		}
	}
	if !r.waitGone(ctx, backends, 30*time.Second) {
		terminateWorkers(admin, r.runID)
		r.progress("warning: %s: killed workers' backends lingered; terminated them", s.d.Name)
	}
	if s.redis != nil {
		return s.redis.snapshot(ctx)
	}
	return nil
}

func countKills(kills []*killRecord) int {
	n := 0
	for _, k := range kills {
		if k != nil {
			n++
		}
	}
	return n
}

func (run *designRun) forEachTrial(ctx context.Context, fn func(context.Context, int) error) error {
	return forEach(ctx, run.r.opts.Parallel, len(run.workload), fn)
}

// recoverTrial retries a first attempt whose reply never came, with the same
// payload, possibly racing a concurrent duplicate; when the retry's reply
// comes too late for the client, the client retries once more.
func (run *designRun) recoverTrial(ctx context.Context, i int) error {
	t := run.workload[i]
	retry, err := deliveryOf(t, KindRetry)
	if err != nil {
		return err
	}
	var reply Reply
	if t.Concurrent {
		other, err := deliveryOf(t, KindConcurrent)
		if err != nil {
			return err
		}
		replies, overlapped, err := run.r.race(ctx, run.s, retry, other)
		if err != nil {
			return err
		}
		run.races.Add(1)
		if overlapped {
			run.overlaps.Add(1)
		}
		run.record(i, other, &replies[1])
		reply = replies[0]
	} else if reply, err = run.r.deliver(ctx, run.s, retry, nil); err != nil {
		return err
	}
	if !t.RetryTimesOut {
		run.record(i, retry, &reply)
		return nil
	}
	run.record(i, retry, nil) // applied, but the client had given up
	return run.deliverKinds(ctx, i, KindTimeoutRetry)
}

// deliverKinds delivers the given kinds of trial i one after the other.
func (run *designRun) deliverKinds(ctx context.Context, i int, kinds ...string) error {
	for _, k := range kinds {
		d, err := deliveryOf(run.workload[i], k)
		if err != nil {
			return err
		}
		rep, err := run.r.deliver(ctx, run.s, d, nil)
		if err != nil {
			return err
		}
		run.record(i, d, &rep)
	}
	return nil
}

// replayLate jumps the simulated clock a week (a design with a TTL sweeps its
// inbox), then the DLQ replays.
func (run *designRun) replayLate(ctx context.Context) error {
	r, s := run.r, run.s
	if s.d.expire != "" {
		if _, err := r.pool.Exec(ctx, s.q[s.d.expire], lateReplayAfter); err != nil {
			return fmt.Errorf("expire: %w", err)
		}
	}
	return run.forEachTrial(ctx, func(ctx context.Context, i int) error {
		if !run.workload[i].LateReplay {
			return nil
		}
		return run.deliverKinds(ctx, i, KindLate)
	})
}

// verdict reads the design's ledger and judges it; a projection is judged
// before its rebuild too.
func (run *designRun) verdict(ctx context.Context) (DesignReport, error) {
	r, s := run.r, run.s
	ledger := s.q[s.d.ledgerStatement()]
	postings, err := readPostings(ctx, r.pool, ledger)
	if err != nil {
		return DesignReport{}, err
	}
	rep := judge(run.workload, run.log, run.kills, postings)
	if s.d.rebuild != "" {
		before := rep.Doubled
		if _, err := r.pool.Exec(ctx, s.q[s.d.rebuild]); err != nil {
			return DesignReport{}, fmt.Errorf("rebuild: %w", err)
		}
		if postings, err = readPostings(ctx, r.pool, ledger); err != nil {
			return DesignReport{}, err
		}
		rep = judge(run.workload, run.log, run.kills, postings)
		rep.DoubledBeforeRebuild = &before
	}
	rep.Design, rep.Expected, rep.Does, rep.Summary = s.d.Name, s.d.Expect, s.d.Does, s.d.Summary
	rep.Trials, rep.Seed, rep.RunID = len(run.workload), r.opts.Seed, r.runID
	rep.Kills = summariseKills(run.kills)
	rep.Races, rep.RacesOverlapped = int(run.races.Load()), int(run.overlaps.Load())
	return rep, nil
}
