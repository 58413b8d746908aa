package horizon

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

var (
	//go:embed sql/new_pins.sql
	newPinsSQL string
	//go:embed sql/partitions.sql
	partitionsSQL string
)

// DefaultBatchRows is how many rows one purge transaction deletes.
const DefaultBatchRows = 5000

// DefaultKeepRatio: a partition wholly before the cutoff is swapped (the rows
// to keep set aside, the partition truncated, the kept rows put back) when it
// keeps at most this fraction of its rows; otherwise it is purged by batches.
// Putting a row back costs about what deleting one costs, and truncating costs
// nothing per row, so the swap wins while fewer rows are kept than removed
// (BenchmarkPurge; scripts/bench-horizon.sh).
const DefaultKeepRatio = 0.5

// ErrInterrupted: the purge stopped between two batches (SIGINT); the plan
// stays purging and `idemctl horizon purge` resumes it.
var ErrInterrupted = errors.New("purge interrupted between batches; run it again to resume")

// PurgeOptions tune a purge.
type PurgeOptions struct {
	Operator string
	// BatchRows is the target rows per transaction (0: DefaultBatchRows).
	BatchRows int
	// KeepRatio chooses swap or batches (0: DefaultKeepRatio; negative: never swap).
	KeepRatio float64
	// Progress is called after each transaction with rows done and the
	// plan's candidates.
	Progress func(done, total int64)
}

// PurgeResult is what one purge run did.
type PurgeResult struct {
	Plan Plan `json:"plan"`
	// Purged is how many rows this run removed (Plan.Purged is the total).
	Purged int64 `json:"purged"`
	// Aborted is true when the re-probe found what the plan did not account
	// for: nothing was deleted by this run.
	Aborted     bool       `json:"aborted"`
	AbortReason string     `json:"abort_reason,omitempty"`
	Evidence    []Evidence `json:"reprobe"`
	Swaps       int        `json:"swaps"`
	Batches     int        `json:"batches"`
	// TxDurations is how long each purge transaction held its locks.
	TxDurations []time.Duration `json:"-"`
}

// LockHoldP99 is the 99th percentile of the transactions' durations.
func (r PurgeResult) LockHoldP99() time.Duration {
	if len(r.TxDurations) == 0 {
		return 0
	}
	d := append([]time.Duration(nil), r.TxDurations...)
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[(len(d)*99+99)/100-1]
}

// Purge executes an approved plan (or resumes a purging one). It re-probes
// every source first: an older bound, a failing source, a removed source, a
// new identity pinned inside the purge set or an entry plan (an import) that
// entered identities into its range after it was made aborts it with nothing deleted
// (Aborted, not an error: a new plan is needed). Then it begins the purge in
// the database (idem.horizon_purge_begin: the login's person, the plan's
// state, one runner at a time) on a connection of its own, removes the plan's
// set in bounded transactions on it, and finishes it. Every step writes its
// own audit row. Cancelling ctx stops it between two transactions
// (ErrInterrupted); an abort of the plan meanwhile stops it at its next batch,
// and an import meanwhile at the transaction that sees it (the database
// refuses it, IX316), which this aborts.
func Purge(ctx context.Context, pool *pgxpool.Pool, id int64, o PurgeOptions) (PurgeResult, error) {
	if o.BatchRows <= 0 {
		o.BatchRows = DefaultBatchRows
	}
	if o.KeepRatio == 0 {
		o.KeepRatio = DefaultKeepRatio
	}
	if err := checkOperator(o.Operator); err != nil {
		return PurgeResult{}, err
	}
	p, err := GetPlan(ctx, pool, id)
	if err != nil {
		return PurgeResult{}, err
	}
	if err := PurgeReady(p); err != nil {
		return PurgeResult{Plan: p}, err
	}
	res := PurgeResult{Plan: p}
	reason, evidence, err := reprobe(ctx, pool, p)
	res.Evidence = evidence
	if err != nil {
		return res, err
	}
	if reason != "" {
		return abortPurge(ctx, pool, res, o.Operator, reason)
	}
	// The runner's lock is a session lock: the purge runs on a connection of
	// its own, closed at the end, never handed back to the pool.
	conn, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
	if err != nil {
		return res, fmt.Errorf("connect for the purge: %w", err)
	}
	defer conn.Close(context.Background())
	ev, _ := json.Marshal(evidence)
	if _, err := conn.Exec(ctx, "SELECT idem.horizon_purge_begin($1, $2, $3)", p.ID, o.Operator, ev); err != nil {
		if err = mapPlanError(err); errors.Is(err, ErrEnteredAfterPlan) {
			// An import committed since the re-probe looked.
			reason, _ := enteredAfter(ctx, pool, p)
			return abortPurge(ctx, pool, res, o.Operator, reason+"; nothing was deleted by this run: make a new plan")
		}
		return res, err
	}
	w := &purgeWork{pool: pool, conn: conn, plan: p, opts: o, res: &res}
	w.done.Store(p.Purged)
	var werr error
	if p.Action == ActionDropTombstones {
		werr = w.dropTombstones(ctx)
	} else {
		werr = w.purgeBody(ctx)
	}
	if werr != nil {
		if errors.Is(mapPlanError(werr), ErrEnteredAfterPlan) {
			// The refused transaction deleted nothing; what earlier ones
			// deleted the plan counted.
			reason, _ := enteredAfter(context.WithoutCancel(ctx), pool, p)
			if reason == "" {
				reason = "identities entered the purge range after the plan was made"
			}
			reason += fmt.Sprintf("; the purge stopped after removing %d rows the plan counted: make a new plan", res.Purged)
			return abortPurge(context.WithoutCancel(ctx), pool, res, o.Operator, reason)
		}
		res.Plan, _ = GetPlan(context.WithoutCancel(ctx), pool, id)
		return res, mapPlanError(werr)
	}
	stats, _ := json.Marshal(map[string]any{"purged": res.Purged, "swaps": res.Swaps, "batches": res.Batches})
	if _, err := conn.Exec(context.WithoutCancel(ctx), "SELECT idem.horizon_purge_finish($1, $2, $3)", p.ID, o.Operator, stats); err != nil {
		return res, mapPlanError(err)
	}
	res.Plan, err = GetPlan(ctx, pool, id)
	return res, err
}

// PurgeReady says why plan p cannot be purged now (ErrPlanState, with what
// to do next for its state), or nil when it is approved or purging.
func PurgeReady(p Plan) error {
	switch p.State {
	case StateApproved, StatePurging:
		return nil
	case StatePlanned:
		return fmt.Errorf("%w: plan %d is planned: another person approves it first: idemctl horizon approve %d", ErrPlanState, p.ID, p.ID)
	case StateDone:
		return fmt.Errorf("%w: plan %d is done (%d rows purged): nothing is left to purge; idemctl horizon status %d shows it",
			ErrPlanState, p.ID, p.Purged, p.ID)
	case StateAborted:
		return fmt.Errorf("%w: plan %d was aborted (%s): it is never purged; make a new plan: idemctl horizon plan --class %s",
			ErrPlanState, p.ID, p.AbortReason, p.Class)
	}
	return fmt.Errorf("%w: plan %d is %s", ErrPlanState, p.ID, p.State)
}

// abortPurge ends plan res.Plan with reason (idem.horizon_abort, with the
// re-probe's evidence) and reports it Aborted: a new plan is needed.
func abortPurge(ctx context.Context, pool *pgxpool.Pool, res PurgeResult, operator, reason string) (PurgeResult, error) {
	ev, _ := json.Marshal(res.Evidence)
	if _, err := pool.Exec(ctx, "SELECT idem.horizon_abort($1, $2, $3, $4)", res.Plan.ID, operator, reason, ev); err != nil {
		return res, mapPlanError(err)
	}
	res.Aborted, res.AbortReason = true, reason
	var err error
	res.Plan, err = GetPlan(ctx, pool, res.Plan.ID)
	return res, err
}

// enteredAfter says which entry plans entered identities into plan p's range
// after p counted its candidates (idem.horizon_entered_after; "" when none):
// p's proof and its approver never saw them.
func enteredAfter(ctx context.Context, pool *pgxpool.Pool, p Plan) (string, error) {
	var ids []int64
	if err := pool.QueryRow(ctx, "SELECT idem.horizon_entered_after($1)", p.ID).Scan(&ids); err != nil {
		return "", fmt.Errorf("entry plans since plan %d: %w", p.ID, err)
	}
	if len(ids) == 0 {
		return "", nil
	}
	names := make([]string, len(ids))
	for i, id := range ids {
		names[i] = fmt.Sprint(id)
	}
	return fmt.Sprintf("entry plan %s (idemctl import / record) entered identities of class %s before the cutoff after the plan counted its candidates: "+
		"the plan never counted them, its proof never saw them", strings.Join(names, ", "), p.Class), nil
}

// reprobe probes every source again against the plan's cutoff and returns why
// the purge must not go on ("" when it may).
func reprobe(ctx context.Context, pool *pgxpool.Pool, p Plan) (string, []Evidence, error) {
	pol, err := GetClass(ctx, pool, p.Class)
	if err != nil {
		return "", nil, err
	}
	if pol.Retention == Forever && p.Contract == "" {
		return "class " + p.Class + " is forever now and the plan cites no contract", nil, nil
	}
	if pol.Retention == Forever && p.Action == ActionDropTombstones {
		return "class " + p.Class + " is forever now: its tombstones are never dropped", nil, nil
	}
	sources, err := ListSources(ctx, pool)
	if err != nil {
		return "", nil, err
	}
	r, err := probeAll(ctx, pool, sources)
	if err != nil {
		return "", nil, err
	}
	defer r.cleanup(pool)
	if err := r.judge(ctx, pool, p.Class, p.Cutoff, p.Margin()); err != nil {
		return "", nil, err
	}
	var reasons []string
	reasons = append(reasons, r.failures()...)
	entered, err := enteredAfter(ctx, pool, p)
	if err != nil {
		return "", nil, err
	}
	if entered != "" {
		reasons = append(reasons, entered)
	}
	now := map[string]bool{}
	for _, s := range sources {
		now[s.Name] = true
	}
	for _, ev := range p.Proof {
		if !now[ev.Source] {
			reasons = append(reasons, fmt.Sprintf("source %s of the proof was removed since the plan", ev.Source))
		}
	}
	rows, err := pool.Query(ctx, newPinsSQL, p.ID, r.runID, 5)
	if err != nil {
		return "", nil, fmt.Errorf("compare pins: %w", err)
	}
	var fresh []string
	for rows.Next() {
		var src, tenant, op string
		if err := rows.Scan(&src, &tenant, &op); err != nil {
			return "", nil, err
		}
		fresh = append(fresh, fmt.Sprintf("%s pins %s/%s", src, tenant, op))
	}
	if err := rows.Err(); err != nil {
		return "", nil, err
	}
	if len(fresh) > 0 {
		reasons = append(reasons, "new identities pinned inside the purge set: "+strings.Join(fresh, ", "))
	}
	if len(reasons) == 0 {
		return "", r.evidence, nil
	}
	return strings.Join(reasons, "; ") + "; nothing was deleted by this run: make a new plan", r.evidence, nil
}

type purgeWork struct {
	pool *pgxpool.Pool
	// conn is the purge's own connection: it holds the runner's lock, and
	// every purge transaction runs on it.
	conn *pgx.Conn
	plan Plan
	opts PurgeOptions
	res  *PurgeResult
	done atomic.Int64
}

type partition struct {
	name       string
	lower      *time.Time
	upper      *time.Time
	isDefault  bool
	blocks     int64
	rowsPerBlk float64
}

// purgeBody removes the plan's body rows, partition by partition.
func (w *purgeWork) purgeBody(ctx context.Context) error {
	p := w.plan
	rows, err := w.pool.Query(ctx, partitionsSQL, p.Cutoff)
	if err != nil {
		return fmt.Errorf("list partitions: %w", err)
	}
	var parts []partition
	for rows.Next() {
		var pt partition
		var tuples float64
		if err := rows.Scan(&pt.name, &pt.lower, &pt.upper, &pt.isDefault, &pt.blocks, &tuples); err != nil {
			return err
		}
		if tuples > 0 && pt.blocks > 0 {
			pt.rowsPerBlk = tuples / float64(pt.blocks)
		}
		parts = append(parts, pt)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, pt := range parts {
		if err := ctx.Err(); err != nil {
			return ErrInterrupted
		}
		if pt.blocks == 0 {
			continue
		}
		whole := !pt.isDefault && pt.upper != nil && !pt.upper.After(p.Cutoff)
		if whole && w.opts.KeepRatio > 0 {
			swapped, err := w.swap(ctx, pt)
			if err != nil {
				return err
			}
			if swapped {
				continue
			}
		}
		name := pt.name
		if err := w.blocks(ctx, name, pt.blocks, pt.rowsPerBlk, "batch", func(ctx context.Context, tx pgx.Tx, from, to int64) (n int64, err error) {
			err = tx.QueryRow(ctx, "SELECT idem.horizon_purge_blocks($1, $2::regclass, $3, $4)", w.plan.ID, name, from, to).Scan(&n)
			return n, err
		}); err != nil {
			return err
		}
	}
	return nil
}

// dropTombstones removes the plan's tombstones from idem.identity by batches.
func (w *purgeWork) dropTombstones(ctx context.Context) error {
	var blocks int64
	var tuples float64
	if err := w.pool.QueryRow(ctx, `SELECT idem.heap_blocks('idem.identity'),
		greatest(reltuples, 0) FROM pg_class WHERE oid = 'idem.identity'::regclass`).Scan(&blocks, &tuples); err != nil {
		return err
	}
	rpb := 60.0
	if blocks > 0 && tuples > 0 {
		rpb = tuples / float64(blocks)
	}
	return w.blocks(ctx, "idem.identity", blocks, rpb, "tombstones", func(ctx context.Context, tx pgx.Tx, from, to int64) (n int64, err error) {
		err = tx.QueryRow(ctx, "SELECT idem.horizon_drop_tombstones_blocks($1, $2, $3)", w.plan.ID, from, to).Scan(&n)
		return n, err
	})
}

// swap empties a partition wholly before the cutoff in one transaction, or
// reports false when it keeps too many rows for that (then: batches).
func (w *purgeWork) swap(ctx context.Context, pt partition) (bool, error) {
	var swapped bool
	err := w.tx(ctx, func(ctx context.Context, tx pgx.Tx) (int64, int64, error) {
		var purged, kept int64
		if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '5s'"); err != nil {
			return 0, 0, err
		}
		if err := tx.QueryRow(ctx, "SELECT purged, kept, swapped FROM idem.horizon_purge_swap($1, $2::regclass, $3)",
			w.plan.ID, pt.name, w.opts.KeepRatio).Scan(&purged, &kept, &swapped); err != nil {
			return 0, 0, fmt.Errorf("swap partition %s: %w", pt.name, err)
		}
		return purged, kept, nil
	}, pt.name, "swap")
	if err == nil && swapped {
		w.res.Swaps++
	}
	return swapped, err
}

// blocks walks a relation's heap in block ranges sized to delete about
// BatchRows candidates per transaction, stopping between two on ctx.
func (w *purgeWork) blocks(ctx context.Context, rel string, blocks int64, rowsPerBlock float64, method string,
	batch func(ctx context.Context, tx pgx.Tx, from, to int64) (int64, error)) error {
	if rowsPerBlock <= 0 {
		rowsPerBlock = 50
	}
	step := max(int64(float64(w.opts.BatchRows)/rowsPerBlock), 1)
	for from := int64(0); from < blocks; {
		if ctx.Err() != nil {
			return ErrInterrupted
		}
		to := min(from+step, blocks)
		if to == blocks {
			// The last range is open-ended: a block appended since the size
			// was read is covered too.
			to = 1<<32 - 1
		}
		var n int64
		err := w.tx(ctx, func(ctx context.Context, tx pgx.Tx) (int64, int64, error) {
			var err error
			if n, err = batch(ctx, tx, from, to); err != nil {
				return 0, 0, fmt.Errorf("purge %s blocks %d-%d: %w", rel, from, to, err)
			}
			return n, 0, nil
		}, rel, method)
		if err != nil {
			return err
		}
		w.res.Batches++
		from = to
		// Aim the next range at BatchRows deletions, within a factor of two.
		if n > 0 {
			next := int64(float64(step) * float64(w.opts.BatchRows) / float64(n))
			step = max(min(next, step*2), step/2, 1)
		}
	}
	return nil
}

// tx runs one purge transaction on the purge's connection and times it; the
// purge function records it in the plan and idem.horizon_batch itself. It runs
// to its end even when ctx is cancelled meanwhile: interruption happens
// between transactions.
func (w *purgeWork) tx(ctx context.Context, fn func(context.Context, pgx.Tx) (int64, int64, error), rel, method string) error {
	ctx = context.WithoutCancel(ctx)
	for attempt := 0; ; attempt++ {
		start := time.Now()
		var rows int64
		err := pgx.BeginFunc(ctx, w.conn, func(tx pgx.Tx) error {
			n, _, err := fn(ctx, tx)
			rows = n
			return err
		})
		var pgErr *pgconn.PgError
		if err != nil && errors.As(err, &pgErr) && (pgErr.Code == "55P03" || pgErr.Code == "40P01") && attempt < 5 {
			// lock_timeout (a long reader holds the day's partition: try again
			// shortly rather than queue its readers behind us), or a deadlock
			// with a purge of another class swapping the same day.
			time.Sleep(time.Duration(200*(attempt+1)) * time.Millisecond)
			continue
		}
		if err != nil {
			return fmt.Errorf("%s %s: %w", method, rel, err)
		}
		w.res.TxDurations = append(w.res.TxDurations, time.Since(start))
		w.res.Purged += rows
		done := w.done.Add(rows)
		if w.opts.Progress != nil {
			w.opts.Progress(done, w.plan.Candidates)
		}
		return nil
	}
}
