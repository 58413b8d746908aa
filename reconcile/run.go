package reconcile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemctl/idemctl/recovery"
)

// DefaultMaxPins is how many discrepancies --pin records at most; a run with
// more pins none (a wrong mapping must not pin a whole day against purges).
const DefaultMaxPins = 10000

// ErrWriteResults: the findings could not be written (a closed pipe, a full
// disk); the run stopped.
var ErrWriteResults = errors.New("cannot write the results")

// Config is one reconcile run.
type Config struct {
	Mapping Mapping
	// Input is the report when Mapping.Report is "-".
	Input io.Reader
	// Operator is recorded in the audit log and in the pins' corrections.
	Operator string
	// EmitResolve, when set, is the file the missing_in_report operations
	// are written to as a resolve batch; Overwrite lets it replace a file.
	EmitResolve string
	// EmitRecord, when set, is the file the missing_in_inbox lines are
	// written to as the input of `idemctl record plan` (never recorded
	// here: a plan needs two persons).
	EmitRecord string
	Overwrite  bool
	// Pin records every discrepancy as a pending manual correction, unless
	// there are more than MaxPins (DefaultMaxPins when 0).
	Pin     bool
	MaxPins int
	// BatchSize is the identities per lookup and the rows per FETCH
	// (DefaultBatchSize when 0); ChunkBytes the report sorted in memory at
	// once (DefaultChunkBytes when 0); TempDir where the sorted runs go
	// (os.TempDir when empty).
	BatchSize  int
	ChunkBytes int
	TempDir    string
	// Now is the operator's clock, for "today" and "yesterday".
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	if c.MaxPins <= 0 {
		c.MaxPins = DefaultMaxPins
	}
	if c.BatchSize <= 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.ChunkBytes <= 0 {
		c.ChunkBytes = DefaultChunkBytes
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// run is the state of one Run.
type run struct {
	cfg    Config
	p      *plan
	pool   *pgxpool.Pool
	emit   func(Finding) error
	sum    Summary
	totals totals
	batch  *BatchFile
	record *BatchFile
	pins   *spool
	dir    string
}

// Run reconciles the mapping's class with its report and calls emit for
// every finding: the invalid lines without an identity first (in line
// order), then the rest in identity order. The report is read whole before
// anything is emitted or written: a report that cannot be read (empty,
// truncated, a mapped column missing) returns ErrInvalidReport with nothing
// emitted, written or recorded. A report with invalid lines is reconciled,
// but nothing is emitted to the batch file or pinned (Summary.Withheld says
// so). The run is recorded in the audit log (action reconcile.run, with the
// report's SHA-256) once it has compared anything.
func Run(ctx context.Context, pool *pgxpool.Pool, cfg Config, emit func(Finding) error) (Summary, error) {
	cfg = cfg.withDefaults()
	cfg.Mapping.withReference = cfg.EmitRecord != ""
	p, err := cfg.Mapping.compile(cfg.Now())
	if err != nil {
		return Summary{}, err
	}
	if _, err := recovery.CheckPrimary(ctx, pool); err != nil {
		return Summary{}, err
	}
	r := &run{cfg: cfg, p: p, pool: pool, emit: emit, sum: Summary{Class: p.Class, Since: p.since, Until: p.until,
		Counts: map[Status]int64{}, StartedAt: time.Now()}}
	if r.dir, err = os.MkdirTemp(cfg.TempDir, "idemctl-reconcile-"); err != nil {
		return Summary{}, fmt.Errorf("reconcile: %w", err)
	}
	defer os.RemoveAll(r.dir)
	if cfg.EmitResolve != "" {
		if r.batch, err = CreateBatchFile(cfg.EmitResolve, cfg.Overwrite); err != nil {
			return Summary{}, err
		}
		defer r.batch.Abort()
	}
	if cfg.EmitRecord != "" {
		if cfg.EmitRecord == cfg.EmitResolve {
			return Summary{}, fmt.Errorf("%w: --emit-record and --emit-resolve name the same file", ErrInvalidMapping)
		}
		if r.record, err = CreateBatchFile(cfg.EmitRecord, cfg.Overwrite); err != nil {
			return Summary{}, err
		}
		defer r.record.Abort()
	}
	// The inbox is read (and sorted on the server) while the report is.
	inbox := openInbox(ctx, pool, p, cfg.BatchSize)
	defer inbox.close()
	sorted, keyless, err := r.readReport(ctx)
	if err != nil {
		return Summary{}, err
	}
	defer sorted.close()
	if cfg.Pin {
		if r.pins, err = newSpool(r.dir, "pins"); err != nil {
			return Summary{}, err
		}
		defer r.pins.close()
	}
	runErr := r.compare(ctx, sorted, keyless, inbox)
	return r.finish(ctx, runErr)
}

// readReport reads the whole report (pass 1): lines with an identity into
// the sorter, invalid lines without one into a spool.
func (r *run) readReport(ctx context.Context) (*mergeIter, *spool, error) {
	rep, err := openReport(r.p, r.cfg.Input)
	if err != nil {
		return nil, nil, err
	}
	defer rep.close()
	srt := newSorter(r.dir, r.cfg.ChunkBytes)
	defer srt.wait() // a chunk still being written when reading fails
	keyless, err := newSpool(r.dir, "keyless")
	if err != nil {
		return nil, nil, err
	}
	for {
		if err := ctx.Err(); err != nil {
			keyless.close()
			return nil, nil, err
		}
		l, err := rep.next()
		if err == io.EOF {
			break
		}
		if err == nil && l.hasKey {
			err = srt.add(l.rec)
		} else if err == nil {
			err = keyless.add(&l.rec)
		}
		if err != nil {
			keyless.close()
			return nil, nil, err
		}
	}
	if r.sum.Report, err = rep.finish(); err != nil {
		keyless.close()
		return nil, nil, err
	}
	it, err := srt.sorted()
	if err != nil {
		keyless.close()
		return nil, nil, err
	}
	return it, keyless, nil
}

// compare emits the keyless invalid lines, then merges the sorted report
// with the inbox (pass 2).
func (r *run) compare(ctx context.Context, sorted *mergeIter, keyless *spool, inbox *inboxStream) error {
	err := keyless.each(func(rec *record) error {
		return r.deliver(&item{f: Finding{Status: Invalid, Line: rec.line, Reason: rec.invalid}})
	})
	keyless.close()
	if err != nil {
		return err
	}
	m := &merger{r: r, rep: sorted, inbox: inbox, cmp: comparer{p: r.p}}
	return m.run(ctx)
}

// finish decides what the run may write (the batch, the pins), writes it,
// and records the run.
func (r *run) finish(ctx context.Context, runErr error) (Summary, error) {
	ctx = context.WithoutCancel(ctx)
	switch {
	case runErr != nil:
		r.sum.Interrupted = true
		r.sum.Withheld = "the run did not finish: nothing emitted or pinned"
	case r.sum.Counts[Invalid] > 0:
		r.sum.Withheld = fmt.Sprintf("the report has %d invalid line(s): nothing emitted or pinned; fix the report and run again",
			r.sum.Counts[Invalid])
	}
	r.sum.Amounts = r.totals.amounts()
	var errs []error
	if runErr != nil {
		errs = append(errs, runErr)
	}
	if r.batch != nil && r.sum.Withheld == "" {
		if err := r.batch.Commit(); err != nil {
			errs = append(errs, err)
		} else {
			r.sum.EmitFile, r.sum.Emitted = r.batch.Path(), r.batch.Lines()
		}
	}
	if r.record != nil && r.sum.Withheld == "" {
		if err := r.record.Commit(); err != nil {
			errs = append(errs, err)
		} else {
			r.sum.RecordFile, r.sum.RecordLines = r.record.Path(), r.record.Lines()
		}
	}
	if r.pins != nil && r.sum.Withheld == "" {
		if err := r.applyPins(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	r.sum.FinishedAt = time.Now()
	id, err := AuditRun(ctx, r.pool, r.cfg.Operator, r.sum, runErr)
	r.sum.AuditID = id
	switch {
	case err != nil && len(errs) == 0:
		return r.sum, &RecordError{Err: err}
	case err != nil:
		errs = append(errs, &RecordError{Err: err})
	}
	return r.sum, errors.Join(errs...)
}

// RecordError: the run could not be recorded in the audit log; its results
// stand.
type RecordError struct{ Err error }

func (e *RecordError) Error() string {
	return "the run was not recorded in the audit log: " + e.Err.Error()
}
func (e *RecordError) Unwrap() error { return e.Err }
