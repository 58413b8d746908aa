package recovery

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/redrive"
)

//go:embed sql/classes.sql
var classesSQL string

// Defaults of Config.
const (
	DefaultConcurrency = 4
	DefaultBatchSize   = 5000
	// partialBatchDelay is how long a dry-run waits for more input before it
	// looks up a partial batch, so that slow input (a pipe) is still answered.
	partialBatchDelay = 20 * time.Millisecond
	// workerQueue is how many operations wait for each worker: enough that
	// one slow operation does not leave the others idle at once.
	workerQueue = 256
	// maxGroup is how many queued operations a worker looks up in one round
	// trip before running them (runGroup).
	maxGroup = 256
)

// Config says how a run goes.
type Config struct {
	// Limits bound each payload (idem.Prepare).
	Limits idem.PayloadLimits
	// Concurrency is the number of operations (or dry-run batches) in flight,
	// each on its own connection: the pool needs at least this many.
	Concurrency int
	// MaxRate caps the operations that reach the primary's executor or a
	// class's service (every executor call, retries included, and every
	// request to a service), per second over any sliding one-second window,
	// spaced evenly (pacer); 0 means no cap. Lookups, which send no
	// operation, are MaxLookupRate's.
	MaxRate float64
	// MaxLookupRate caps the identities looked up per second (a dry run's
	// lookups, a real run's batched reads of what is already there, the read
	// before a re-drive), in bursts of up to one second's worth; 0 means no
	// cap, except in a dry run, whose lookups MaxRate then caps. The reads
	// that verify a re-drive after each request are not capped.
	MaxLookupRate float64
	// DryRun looks identities up without writing anything.
	DryRun bool
	// BatchSize is how many identities one dry-run round trip looks up.
	BatchSize int
	// Window is how many operations may be between reading and output; it
	// bounds memory. 0 picks one that keeps every worker busy.
	Window int
	// Operator is who runs it, recorded with the run and with conflicts.
	Operator string
	// Source names the input for the run record.
	Source string
	// RecordRun, when set, records the run for audit at its end, interrupted
	// or not (not when the database was refused at the start: nothing ran).
	RecordRun func(ctx context.Context, s RunSummary) error
	// RetryFor is how long an operation (or dry-run batch) caught in a
	// connection failure is retried, with backoff from 100 ms to 5 s, before
	// the run stops with ErrUnreachable; 0 means DefaultRetryFor.
	RetryFor time.Duration
	// Started, when set, is called once the database has passed the primary
	// check, before anything is read or run; an error ends the run there,
	// with nothing done and nothing recorded. (The CLI creates its report
	// file here, so that a refused run leaves an existing report alone.)
	Started func() error
	// Flush, when set, is called after the last result has been emitted and
	// before the run is recorded; an error is a write error, like emit's.
	Flush func() error
	// Credentials is what a re-drive's header references may read (the
	// person running it sets it aside).
	Credentials redrive.Credentials
}

// ErrWriteResults wraps an error writing results (emit or Config.Flush): the
// run stopped reading there; RunSummary.Counts still count every answer.
var ErrWriteResults = errors.New("write results")

// Resolver runs the recovery protocol over a Source.
type Resolver struct {
	Pool *pgxpool.Pool
	Config

	answered atomic.Int64
	consumed atomic.Int64
	// downSince is when the database stopped answering (UnixNano), 0 while
	// it answers.
	downSince atomic.Int64
	senders

	// ops paces executor calls and service requests; lookups paces lookups.
	ops     *pacer
	lookups *limiter
	// input is what the input holds per identity (scanInput).
	input *inputPayloads

	// idHash, for tests, replaces identityKey in the input scan's entries
	// (to force identities to share a hash).
	idHash func(seed maphash.Seed, tenant, operationID string) uint64

	// afterSend, for tests, runs between sending an operation's pipeline and
	// reading its results.
	afterSend func(ctx context.Context, conn *pgx.Conn, id idem.Identity)
}

func (r *Resolver) retryFor() time.Duration {
	if r.RetryFor > 0 {
		return r.RetryFor
	}
	return DefaultRetryFor
}

// Progress returns how many lines have been answered so far (as they are
// answered, lookups and applies alike, before they are emitted in input
// order) and how many input bytes have been consumed; safe to call while Run
// runs.
func (r *Resolver) Progress() (answered int64, bytes int64) {
	return r.answered.Load(), r.consumed.Load()
}

// Outage says whether the database has stopped answering, for how long, and
// how long the run keeps retrying (Config.RetryFor) before it stops; safe to
// call while Run runs.
func (r *Resolver) Outage() (down bool, since time.Duration, retryFor time.Duration) {
	at := r.downSince.Load()
	if at == 0 {
		return false, 0, r.retryFor()
	}
	return true, time.Since(time.Unix(0, at)), r.retryFor()
}

// backoff is the retry pacing of one operation, which marks the outage.
func (r *Resolver) backoff() backoff {
	return backoff{budget: r.retryFor(), down: &r.downSince}
}

// reachable clears the outage mark: the database answered.
func (r *Resolver) reachable() {
	if r.downSince.Load() != 0 {
		r.downSince.Store(0)
	}
}

// job is one prepared operation on its way to a worker.
type job struct {
	pos  int
	line int
	// req is the line as read, until prepare turns it into p.
	req Request
	// text is the line not yet parsed (a dry run parses it with prepare, on
	// every core); req is empty until then.
	text []byte
	p    idem.Prepared
	classInfo
	firstAttempt time.Time
	jobInput
}

// classInfo is what a run knows of a class.
type classInfo struct {
	sqlEffect bool
	// redrive is set for an application-code class re-driven through its
	// service; idempotent is its downstream_idempotent.
	redrive    *redrive.Config
	idempotent bool
}

// jobInput is what the whole input says of a job's identity.
type jobInput struct {
	// inputOther is the first line of the input holding this identity with
	// another payload; 0 when there is none.
	inputOther int
}

func (j job) result() Result {
	return Result{Line: j.line, Tenant: j.p.TenantID, OperationID: j.p.OperationID, Class: j.p.Class, IncomingHash: j.p.Hash,
		firstAttempt: j.firstAttempt}
}

// Run resolves every operation of src and passes each result to emit, in
// input order. It returns a *NotPrimaryError (errors.Is ErrNotPrimary) when
// the database is refused, before anything or midway, and an
// *UnreachableError (ErrUnreachable) when it stays unreachable midway; an
// error from src ends the run too, and so does one from emit (or
// Config.Flush), returned wrapped in ErrWriteResults. Cancelling ctx stops
// reading. However a run stops, operations already in a transaction finish
// (commit or roll back, never half), the summary so far is returned with
// Interrupted set, and its counts are every answer given, written or not.
//
// Operations of one identity run in input order, one after the other: each
// goes to the worker its identity hashes to. A dry run answers a later line
// of an identity it has answered would_apply as the real run would
// (runIdentities).
func (r *Resolver) Run(ctx context.Context, src Source, emit func(Result) error) (RunSummary, error) {
	cfg := r.Config
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.DryRun {
		cfg.BatchSize = paceBatch(cfg.BatchSize, cfg.MaxLookupRate, cfg.MaxRate)
	}
	if cfg.Window <= 0 {
		cfg.Window = max(1024, cfg.Concurrency*2*workerQueue)
		if cfg.DryRun {
			cfg.Window = cfg.BatchSize * (cfg.Concurrency + 2)
		}
	}
	sum := RunSummary{Operator: cfg.Operator, Source: cfg.Source, DryRun: cfg.DryRun, Counts: Counts{}}

	started, classes, err := r.start(ctx)
	if err != nil {
		return sum, err
	}
	sum.StartedAt = started
	failover := r.failover(ctx, &sum)
	seed := maphash.MakeSeed()
	if r.input, err = r.scanInput(ctx, src, classes, seed); err != nil {
		return sum, fmt.Errorf("read the input before the run: %w", err)
	}
	// Every worker has returned before Run does: the entries can go.
	defer func() {
		r.input.release()
		r.input = nil
	}()
	if cfg.Started != nil {
		if err := cfg.Started(); err != nil {
			return sum, err
		}
	}

	// stopCtx ends reading; work goes on under workCtx so that a Ctrl-C never
	// cuts a transaction in half (statement_timeout still bounds it).
	stopCtx, stop := context.WithCancel(ctx)
	defer stop()
	workCtx := context.WithoutCancel(ctx)
	var fatalOnce sync.Once
	var fatal error
	fail := func(err error) {
		fatalOnce.Do(func() { fatal = err })
		stop()
	}

	var seen *runIdentities
	if cfg.DryRun {
		seen = newRunIdentities(r.input)
	}
	win := newWindow(cfg.Window, func(res *Result) {
		failover.note(res, started, classes[res.Class].sqlEffect)
		if seen != nil {
			seen.settle(res)
		}
		sum.Counts[res.Outcome]++
		if res.Conditional {
			sum.Conditional++
		}
		if res.EntryPlan != 0 {
			sum.Entered++
		}
		switch {
		case res.Redrive.Sent():
			sum.Redriven++
			if errors.Is(res.Err, ErrRedriveUnknown) {
				sum.RedriveUnknown++
			}
		case res.Redrive != nil:
			sum.NotSent++
		}
	}, emit, func(error) { stop() })
	win.settled = &r.answered
	lookupRate := cfg.MaxLookupRate
	if cfg.DryRun && lookupRate == 0 {
		lookupRate = cfg.MaxRate
	}
	r.ops, r.lookups = newPacer(cfg.MaxRate), newLimiter(lookupRate)
	pl := &runPipeline{r: r, classes: classes, win: win, stopCtx: stopCtx, workCtx: workCtx, fail: fail}
	var send func(job) bool
	var closeQueues func()
	if cfg.DryRun {
		send, closeQueues = pl.startLookups(cfg.Concurrency, cfg.BatchSize)
	} else {
		send, closeQueues = pl.startWorkers(cfg.Concurrency, seed)
	}

	eof := r.dispatch(stopCtx, src, win, send, &sum, fail)
	closeQueues()
	pl.workers.Wait()
	r.closeSenders()
	sum.Interrupted = !eof || win.unanswered() > 0
	sum.Unknown = int(pl.unknown.Load())

	sum.WriteErr = win.err()
	if cfg.Flush != nil {
		if err := cfg.Flush(); err != nil && sum.WriteErr == nil {
			sum.WriteErr = err
		}
	}
	var errs []error
	if fatal != nil {
		errs = append(errs, fatal)
	}
	if sum.WriteErr != nil {
		errs = append(errs, fmt.Errorf("%w: %w", ErrWriteResults, sum.WriteErr))
	}
	r.finish(ctx, &sum)
	if err := r.record(ctx, sum); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 1 {
		return sum, errs[0]
	}
	return sum, errors.Join(errs...)
}

// runPipeline is what a run's workers share: the classes, the window of
// answers, and the contexts (stopCtx ends reading, workCtx
// outlives a Ctrl-C so that no transaction is cut in half).
type runPipeline struct {
	r       *Resolver
	classes map[string]classInfo
	win     *window
	stopCtx context.Context
	workCtx context.Context
	fail    func(error)
	workers sync.WaitGroup
	unknown atomic.Int64 // operations whose outcome is unknown (lost connections)
}

// startLookups starts a dry run's pipeline: lines are prepared (canonicalised,
// hashed) on every core, gathered into batches of batchSize and looked up on
// concurrency connections. It returns how to send a line and how to say that
// no more will come.
func (p *runPipeline) startLookups(concurrency, batchSize int) (send func(job) bool, closeQueues func()) {
	raw := make(chan job, 256)
	jobs := make(chan job, 256)
	batches := make(chan []job, concurrency)
	var preparers sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		preparers.Add(1)
		go func() {
			defer preparers.Done()
			var parser lineParser
			for j := range raw {
				if j.text != nil && !p.parse(&j, &parser) {
					continue
				}
				if p.r.prepare(&j, p.classes, p.win) {
					jobs <- j
				}
			}
		}()
	}
	go func() {
		preparers.Wait()
		close(jobs)
	}()
	p.workers.Add(1)
	go func() {
		defer p.workers.Done()
		defer close(batches)
		batchJobs(jobs, batches, batchSize)
	}()
	for range concurrency {
		p.workers.Add(1)
		go func() {
			defer p.workers.Done()
			for b := range batches {
				if p.stopCtx.Err() != nil || !p.r.lookups.wait(p.stopCtx, len(b)) {
					for _, j := range b {
						p.win.done(j.pos, Result{skipped: true})
					}
					continue
				}
				if err := p.r.lookup(p.workCtx, p.stopCtx.Done(), b, p.win); err != nil {
					p.fail(err)
				}
			}
		}()
	}
	send = func(j job) bool {
		select {
		case raw <- j:
			return true
		case <-p.stopCtx.Done():
			return false
		}
	}
	closeQueues = func() { close(raw) }
	return send, closeQueues
}

// parse reads a job's line (see dispatch); false, with the line answered
// invalid, when it cannot.
func (p *runPipeline) parse(j *job, parser *lineParser) bool {
	it := rawLine{item: Item{Line: j.line}, text: j.text}.parsed(parser)
	j.text, j.req, j.firstAttempt = nil, it.Request, it.Request.FirstAttemptAt
	if it.Invalid != nil {
		p.win.done(j.pos, Result{Line: it.Line, Tenant: it.Request.Tenant, OperationID: it.Request.OperationID,
			Class: it.Request.Class, Outcome: Invalid, Err: it.Invalid})
		return false
	}
	return true
}

// startWorkers starts a real run's pipeline: concurrency workers, each fed
// the lines of the identities that hash to it (so that one identity's lines
// run in input order), each answering what is already there from batched
// lookups and running the executor for the rest.
func (p *runPipeline) startWorkers(concurrency int, seed maphash.Seed) (send func(job) bool, closeQueues func()) {
	queues := make([]chan job, concurrency)
	for i := range queues {
		queues[i] = make(chan job, workerQueue)
		p.workers.Add(1)
		go func(q <-chan job) {
			defer p.workers.Done()
			var ahead lookAhead
			for {
				g, more := nextGroup(q, maxGroup)
				valid := g[:0]
				for _, j := range g {
					if p.r.prepare(&j, p.classes, p.win) {
						valid = append(valid, j)
					}
				}
				if len(valid) > 0 {
					p.r.runGroup(p.workCtx, p.stopCtx, valid, &ahead, p.win, p.fail, &p.unknown)
				}
				if !more {
					return
				}
			}
		}(queues[i])
	}
	send = func(j job) bool {
		q := queues[identityKey(seed, j.req.Tenant, j.req.OperationID)%uint64(len(queues))]
		select {
		case q <- j:
			return true
		case <-p.stopCtx.Done():
			return false
		}
	}
	closeQueues = func() {
		for _, q := range queues {
			close(q)
		}
	}
	return send, closeQueues
}

// dispatch reads src until its end (true) or until stopCtx is done (false),
// answering unreadable lines at once and sending the others on, to be
// prepared (canonicalised, hashed) in parallel: reading is the one serial
// step.
func (r *Resolver) dispatch(stopCtx context.Context, src Source, win *window,
	send func(job) bool, sum *RunSummary, fail func(error)) bool {
	pos := 0
	// A dry run's preparers parse the lines: reading is then all that is
	// serial. The texts are kept in blocks, each held until its last line is
	// answered.
	nd, raw := src.(*ndjson)
	raw = raw && r.DryRun
	var block []byte
	for {
		if stopCtx.Err() != nil {
			return false
		}
		var it Item
		var text []byte
		var err error
		if raw {
			if cap(block)-len(block) < 4<<10 {
				block = make([]byte, 0, 256<<10)
			}
			var rl rawLine
			rl, block, err = nd.nextRaw(block)
			it, text = rl.item, rl.text
		} else {
			it, err = src.Next()
		}
		if err == io.EOF {
			return true
		}
		if err != nil {
			fail(err)
			return false
		}
		r.consumed.Add(int64(it.Bytes))
		if !win.acquire(stopCtx) {
			return false
		}
		sum.Read++
		sum.LastLine = it.Line
		j := job{pos: pos, line: it.Line, req: it.Request, firstAttempt: it.Request.FirstAttemptAt, text: text}
		pos++
		if it.Invalid != nil {
			win.done(j.pos, Result{Line: it.Line, Tenant: it.Request.Tenant, OperationID: it.Request.OperationID,
				Class: it.Request.Class, Outcome: Invalid, Err: it.Invalid})
			continue
		}
		if !send(j) {
			win.done(j.pos, Result{skipped: true})
			return false
		}
	}
}

// prepare canonicalises and hashes a job's payload and finds its class, off
// the reading goroutine; false, with the line answered invalid, when it
// cannot. A dry run keeps only the identity and the hash: a lookup needs no
// more, and a window of payloads of up to MaxBytes would be a lot to hold.
func (r *Resolver) prepare(j *job, classes map[string]classInfo, win *window) bool {
	base := Result{Line: j.line, Tenant: j.req.Tenant, OperationID: j.req.OperationID, Class: j.req.Class}
	p, err := prepare(j.req, r.Limits)
	if err != nil {
		base.Outcome, base.Err = Invalid, err
		win.done(j.pos, base)
		return false
	}
	info, known := classes[p.Class]
	if !known {
		base.Outcome, base.IncomingHash = Invalid, p.Hash
		base.Err = fmt.Errorf("%w %q: register it first (idem.register_class)", idem.ErrUnknownClass, p.Class)
		win.done(j.pos, base)
		return false
	}
	j.p, j.classInfo, j.req = p, info, Request{}
	j.inputOther = r.input.other(p.TenantID, p.OperationID, p.Hash, p.Class)
	if r.DryRun {
		j.p.Payload, j.p.Canonical, j.p.Transport = nil, nil, nil
	}
	return true
}

// batchJobs groups jobs into batches of up to size, sending a partial batch
// when no job has come for partialBatchDelay.
func batchJobs(jobs <-chan job, batches chan<- []job, size int) {
	batch := make([]job, 0, size)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	flush := func() {
		if len(batch) > 0 {
			batches <- batch
			batch = make([]job, 0, size)
		}
	}
	for {
		select {
		case j, ok := <-jobs:
			if !ok {
				flush()
				return
			}
			batch = append(batch, j)
			if len(batch) == size {
				timer.Stop()
				flush()
			} else if len(batch) == 1 {
				timer.Reset(partialBatchDelay)
			}
		case <-timer.C:
			flush()
		}
	}
}

// finish stamps the end of the run with the database clock and records it.
func (r *Resolver) finish(ctx context.Context, sum *RunSummary) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := r.Pool.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&sum.FinishedAt); err != nil {
		sum.FinishedAt = time.Now()
	}
}

// ErrNotRecorded means the run happened but its audit record could not be
// written; the results stand.
var ErrNotRecorded = errors.New("run not recorded")

// RecordError is a failure to record the run (errors.Is ErrNotRecorded).
// Run joins it after the run's own errors, if any, so that a caller can tell
// the two apart.
type RecordError struct{ Err error }

func (e *RecordError) Error() string { return ErrNotRecorded.Error() + ": " + e.Err.Error() }

// Unwrap makes errors.Is(err, ErrNotRecorded) true.
func (e *RecordError) Unwrap() error { return ErrNotRecorded }

// record passes the summary to RecordRun, if set.
func (r *Resolver) record(ctx context.Context, sum RunSummary) error {
	if r.RecordRun == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := r.RecordRun(ctx, sum); err != nil {
		return &RecordError{Err: err}
	}
	return nil
}

// start is step 1 before the run and the classes it needs. A connection
// the server ended meanwhile (a DBA's pg_terminate_backend, a restart) is
// tried again on a new one, with the lines' backoff, for Config.RetryFor, as
// an operation caught in one would be; a database that cannot be reached at
// all is reported at once.
func (r *Resolver) start(ctx context.Context) (started time.Time, classes map[string]classInfo, err error) {
	var connect *pgconn.ConnectError
	deadline := time.Now().Add(r.retryFor())
	for wait := retryFirst; ; wait = min(2*wait, retryMax) {
		started, err = CheckPrimary(ctx, r.Pool)
		if err == nil {
			classes, err = loadClasses(ctx, r.Pool)
		}
		if err == nil || !connectionFailure(err) || errors.As(err, &connect) || ctx.Err() != nil || time.Now().Add(wait).After(deadline) {
			return started, classes, err
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return started, classes, err
		}
	}
}

func loadClasses(ctx context.Context, db idem.DBTX) (map[string]classInfo, error) {
	rows, err := db.Query(ctx, classesSQL)
	if err != nil {
		return nil, fmt.Errorf("read operation classes: %w", err)
	}
	defer rows.Close()
	out := map[string]classInfo{}
	for rows.Next() {
		var name string
		var c classInfo
		var raw []byte
		if err := rows.Scan(&name, &c.sqlEffect, &raw, &c.idempotent); err != nil {
			return nil, fmt.Errorf("read operation classes: %w", err)
		}
		if raw != nil {
			c.redrive = &redrive.Config{}
			if err := json.Unmarshal(raw, c.redrive); err != nil {
				return nil, fmt.Errorf("read the re-drive of class %s: %w", name, err)
			}
		}
		out[name] = c
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read operation classes: %w", err)
	}
	return out, nil
}

// errAppEffect: the identity is absent and its effect is application code.
var errAppEffect = errors.New("the identity is absent, and this class runs its effect in application code, which resolve cannot run: " +
	"configure its re-drive (idemctl class set CLASS --redrive http|nats ... --downstream-idempotent) or replay it through the service that owns it")
