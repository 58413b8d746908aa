package importer

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemctl/idemctl/governance"
)

// stageColumns are the columns of an import plan's stage idemctl copies.
var stageColumns = []string{"tenant_id", "operation_id", "payload", "payload_hash", "response", "created_at", "store_hash", "evidence"}

// stage plans the rows into the plan's stage in the database
// (idem.import_plan_stage_open): one COPY, fed while the source is read
// and classified on the other cores, so the database stores the rows as
// they come. idem.import_plan_seal_stage then checks them and computes the
// plan's digest, counts and sample itself.
func (p *planner) stage() error {
	var table string
	if err := p.tx.QueryRow(p.ctx, "SELECT idem.import_plan_stage_open($1)", p.id).Scan(&table); err != nil {
		return fmt.Errorf("plan import: %w", governance.MapError(err))
	}
	p.staging = true
	cs := &stageSource{p: p, chunks: p.classified(), last: time.Now()}
	defer cs.chunks.stop()
	if _, err := p.tx.CopyFrom(p.ctx, pgx.Identifier{"idem", "import_stage_" + strconv.FormatInt(p.id, 10)}, stageColumns, cs); err != nil {
		if cs.err != nil {
			// the source's error (named) or a list's: not the idem database's
			return fmt.Errorf("plan import: stage the rows: %w", cs.err)
		}
		return fmt.Errorf("plan import: stage the rows: %w", governance.MapError(err))
	}
	if p.o.Progress != nil {
		p.o.Progress(p.counts)
	}
	return nil
}

// stageSource feeds the plan's COPY: the Import verdicts of the classified
// chunks, every row counted and written to its sink on the way.
type stageSource struct {
	p      *planner
	chunks *classifier
	cur    classifiedChunk
	next   int
	vals   []any
	err    error
	last   time.Time
}

func (s *stageSource) Next() bool {
	for {
		for s.next < len(s.cur.rows) {
			i := s.next
			s.next++
			r, v := s.cur.rows[i], &s.cur.verdicts[i]
			if err := s.p.row(r, *v); err != nil {
				s.err = err
				return false
			}
			if s.p.o.Progress != nil && s.p.counts.Read%1000 == 0 && time.Since(s.last) >= s.p.o.ProgressEvery {
				s.last = time.Now()
				s.p.o.Progress(s.p.counts)
			}
			if v.Kind == Import && !s.p.beforeSince(r) {
				s.vals = stageValues(s.vals, v)
				return true
			}
		}
		c, ok := <-s.chunks.out
		if !ok {
			return false
		}
		if c.err != nil {
			s.err = c.err
			return false
		}
		s.cur, s.next = c, 0
	}
}

func (s *stageSource) Values() ([]any, error) { return s.vals, nil }

func (s *stageSource) Err() error { return s.err }

// runStaged runs a staged plan (idem.import_plan_seal_stage) from its
// stage: the body partitions of the plan's ages are made, then
// idem.import_run_begin, the chunks (idem.import_run_chunk), each its own
// transaction, on as many connections as the pool allows up to workers,
// and idem.import_run_finish. The source is not read again: what enters is
// the stage, which the approver's read of the source was compared with
// (idem.import_plan_approve; idem.import_run_begin refuses a plan approved
// without that check). A plan already running (a run that stopped)
// resumes: the chunks that committed are not entered twice.
func runStaged(ctx context.Context, db TxBeginner, plan governance.EntryPlan, operator string, workers int) (governance.EntryPlan, error) {
	id := plan.ID
	if plan.State == "approved" {
		var counts struct {
			Oldest time.Time `json:"oldest"`
			Newest time.Time `json:"newest"`
		}
		if err := json.Unmarshal(plan.Counts, &counts); err != nil {
			return governance.EntryPlan{}, fmt.Errorf("import plan %d: its counts: %w", id, err)
		}
		// In transactions of at most 400 days, before the run's own
		// (which then finds them made).
		if err := ensurePartitions(ctx, db, counts.Oldest, counts.Newest); err != nil {
			return governance.EntryPlan{}, fmt.Errorf("import plan %d: %w; nothing entered", id, err)
		}
	}
	p, err := inTx(ctx, db, func(tx pgx.Tx) (governance.EntryPlan, error) {
		return governance.OneEntry(tx.Query(ctx, "SELECT to_jsonb(p) FROM idem.import_run_begin($1, $2) p", id, operator))
	})
	if err != nil {
		return governance.EntryPlan{}, err
	}
	var counts struct {
		ChunkRows int `json:"chunk_rows"`
	}
	if err := json.Unmarshal(p.Counts, &counts); err != nil || counts.ChunkRows <= 0 {
		return governance.EntryPlan{}, fmt.Errorf("import plan %d: its chunk size: %v", id, err)
	}
	chunks := (p.Items + counts.ChunkRows - 1) / counts.ChunkRows
	if pool, ok := db.(*pgxpool.Pool); !ok {
		workers = 1
	} else if conns := int(pool.Config().MaxConns); workers > conns {
		workers = conns
	}
	workers = max(1, min(workers, chunks))
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k := int(next.Add(1) - 1)
				if k >= chunks || ctx.Err() != nil {
					return
				}
				_, err := inTx(ctx, db, func(tx pgx.Tx) (struct{}, error) {
					_, err := tx.Exec(ctx, "SELECT idem.import_run_chunk($1, $2, $3)", id, operator, k)
					return struct{}{}, err
				})
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("import plan %d: chunk %d of %d: %w (the chunks that committed stay entered; run it again to resume)",
							id, k, chunks, governance.MapError(err))
					}
					mu.Unlock()
					cancel()
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return governance.EntryPlan{}, firstErr
	}
	return inTx(context.WithoutCancel(ctx), db, func(tx pgx.Tx) (governance.EntryPlan, error) {
		return governance.OneEntry(tx.Query(ctx, "SELECT to_jsonb(p) FROM idem.import_run_finish($1, $2) p", id, operator))
	})
}

// inTx runs f in a transaction of its own without a statement timeout (a
// chunk of an import outlasts one meant for a lookup) and commits it; the
// commit happens even if ctx is cancelled meanwhile.
func inTx[T any](ctx context.Context, db TxBeginner, f func(pgx.Tx) (T, error)) (T, error) {
	var zero T
	tx, err := db.Begin(ctx)
	if err != nil {
		return zero, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, "SET LOCAL statement_timeout = 0"); err != nil {
		return zero, err
	}
	v, err := f(tx)
	if err != nil {
		return zero, err
	}
	return v, tx.Commit(context.WithoutCancel(ctx))
}

// ensurePartitions makes the body partitions of the days from oldest to
// newest (idem.inbox_body_ensure, at most 400 days a call).
func ensurePartitions(ctx context.Context, db TxBeginner, oldest, newest time.Time) error {
	from, to := oldest.UTC().Truncate(24*time.Hour), newest.UTC().Truncate(24*time.Hour)
	for !from.After(to) {
		end := from.AddDate(0, 0, 399)
		if end.After(to) {
			end = to
		}
		if _, err := inTx(ctx, db, func(tx pgx.Tx) (struct{}, error) {
			_, err := tx.Exec(ctx, "SELECT idem.inbox_body_ensure($1::date, $2::date)", from.Format(time.DateOnly), end.Format(time.DateOnly))
			return struct{}{}, err
		}); err != nil {
			return fmt.Errorf("body partitions: %w", err)
		}
		from = end.AddDate(0, 0, 1)
	}
	return nil
}
