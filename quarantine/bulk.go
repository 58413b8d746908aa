package quarantine

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemctl/idemctl/idem"
)

var (
	//go:embed sql/bulk_next.sql
	bulkNextSQLFile string
	bulkNextSQL     = withFilter(bulkNextSQLFile)
	//go:embed sql/ids_status.sql
	idsStatusSQL string
	//go:embed sql/reject_batch.sql
	rejectBatchSQL string
)

// Bulk limits.
const (
	// DefaultBatch is how many records one transaction of a bulk decision
	// decides; MaxBatch is the most the database takes at once.
	DefaultBatch = 200
	MaxBatch     = 1000
	// MaxIDs is the most ids a bulk decision takes on stdin.
	MaxIDs = 1_000_000
	// SampleSize is how many records a preview shows.
	SampleSize = 5
)

// ErrNothingToDecide: the selection holds no open record.
var ErrNothingToDecide = errors.New("no open record to decide")

// Selection is what a bulk decision decides: the open records matching a
// filter (a group is a filter), or an explicit list of ids.
type Selection struct {
	Filter Filter
	// IDs, when set, replaces the filter.
	IDs []int64
}

// Preview is what a bulk decision will decide, shown before it asks.
type Preview struct {
	// Open is the number of open records it will decide.
	Open int64 `json:"open"`
	// Decided counts ids of an explicit list already decided (skipped).
	Decided int64 `json:"already_decided,omitempty"`
	// MaxID bounds the run to the records the preview counted: a record
	// arriving after the preview is not decided by it.
	MaxID int64 `json:"max_id"`
	// Sample is a few of the records, newest activity first.
	Sample []Summary `json:"sample"`
	// Filter is the filter (nil for an explicit list).
	Filter *Filter `json:"filter,omitempty"`
	// IDs are the open records counted, the exact set a token stores.
	IDs []int64 `json:"-"`
}

// PreviewBulk counts and samples what a bulk decision would decide. It
// refuses (ErrInvalidFilter) a filter that narrows nothing, ids that do not
// exist, and (ErrNothingToDecide) a selection with nothing open.
func PreviewBulk(ctx context.Context, db idem.DBTX, sel Selection) (Preview, error) {
	if sel.IDs != nil {
		return previewIDs(ctx, db, sel.IDs)
	}
	f := sel.Filter
	f.Status, f.After = StatusOpen, nil
	if !f.Narrowed() {
		return Preview{}, fmt.Errorf("%w: a bulk decision needs a filter (--tenant, --op-prefix, --class, --changed, --group...) or ids on stdin", ErrInvalidFilter)
	}
	if err := f.Validate(); err != nil {
		return Preview{}, err
	}
	p := Preview{Filter: &f}
	args := f.args()
	args["after_id"], args["limit"] = int64(0), MaxIDs
	rows, err := db.Query(ctx, bulkNextSQL, pgx.QueryExecModeExec, args)
	if err != nil {
		return Preview{}, fmt.Errorf("preview: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return Preview{}, fmt.Errorf("preview: %w", err)
	}
	if len(ids) == 0 {
		return Preview{}, fmt.Errorf("%w: nothing open matches the filter", ErrNothingToDecide)
	}
	p.Open, p.MaxID, p.IDs = int64(len(ids)), ids[len(ids)-1], ids
	f.Limit = SampleSize
	page, err := List(ctx, db, f)
	if err != nil {
		return Preview{}, err
	}
	p.Sample = page.Items
	return p, nil
}

func previewIDs(ctx context.Context, db idem.DBTX, ids []int64) (Preview, error) {
	if len(ids) == 0 {
		return Preview{}, fmt.Errorf("%w: no record ids on stdin: pipe ids, one a line (idemctl quarantine list -o json | jq .id)", ErrInvalidFilter)
	}
	if len(ids) > MaxIDs {
		return Preview{}, fmt.Errorf("%w: %d ids on stdin, at most %d: split them", ErrInvalidFilter, len(ids), MaxIDs)
	}
	rows, err := db.Query(ctx, idsStatusSQL, pgx.NamedArgs{"ids": ids})
	if err != nil {
		return Preview{}, fmt.Errorf("preview: %w", err)
	}
	status := map[int64]Status{}
	var id int64
	var st Status
	if _, err := pgx.ForEachRow(rows, []any{&id, &st}, func() error { status[id] = st; return nil }); err != nil {
		return Preview{}, fmt.Errorf("preview: %w", err)
	}
	var p Preview
	var missing []int64
	for _, id := range uniqueIDs(ids) {
		switch st, ok := status[id]; {
		case !ok:
			missing = append(missing, id)
		case st == StatusOpen:
			p.Open++
			p.MaxID = max(p.MaxID, id)
			p.IDs = append(p.IDs, id)
		default:
			p.Decided++
		}
	}
	if len(missing) > 0 {
		more := ""
		if len(missing) > 5 {
			more = fmt.Sprintf(" and %d more", len(missing)-5)
			missing = missing[:5]
		}
		return Preview{}, fmt.Errorf("%w: no record %v%s: check the ids on stdin; nothing was decided", ErrNotFound, missing, more)
	}
	if p.Open == 0 {
		return p, fmt.Errorf("%w: all %d ids are already decided", ErrNothingToDecide, p.Decided)
	}
	for _, id := range uniqueIDs(ids) {
		if len(p.Sample) == SampleSize {
			break
		}
		if status[id] != StatusOpen {
			continue
		}
		rec, err := Show(ctx, db, id)
		if err != nil {
			return Preview{}, err
		}
		p.Sample = append(p.Sample, Summary{ID: rec.ID, Tenant: rec.Tenant, OperationID: rec.OperationID, Class: rec.Class,
			IncomingClass: rec.IncomingClass, Status: rec.Status, Occurrences: rec.Occurrences, FirstSeen: rec.FirstSeen,
			LastSeen: rec.LastSeen, Changes: len(rec.Diff)})
	}
	return p, nil
}

func uniqueIDs(ids []int64) []int64 {
	out := slices.Clone(ids)
	slices.Sort(out)
	return slices.Compact(out)
}

// DB is a handle that both queries and begins transactions: *pgxpool.Pool.
type DB interface {
	idem.DBTX
	idem.TxBeginner
}

// BulkOptions are the input of RejectBulk.
type BulkOptions struct {
	Operator, Reason string
	// MaxID is the preview's: records added since are left alone.
	MaxID int64
	// Batch is the number of records per transaction (DefaultBatch when 0).
	Batch int
	// Progress, when set, is called after each committed batch.
	Progress func(BulkResult)
}

// BulkResult is where a bulk decision stands.
type BulkResult struct {
	// Run labels the run; every audit row it wrote carries it (bulk_run).
	Run string `json:"run"`
	// Decided is the number of records this run decided.
	Decided int64 `json:"decided"`
	// Skipped are records already decided when their batch came (by an
	// earlier, interrupted run, or by someone else): not decided again.
	Skipped int64 `json:"skipped"`
	// Batches is the number of transactions committed.
	Batches int `json:"batches"`
	// Interrupted is true when the context ended the run between batches:
	// what was committed stays; the same command again finishes it.
	Interrupted bool `json:"interrupted,omitempty"`
	// FirstAudit and LastAudit bound the audit rows written.
	FirstAudit int64 `json:"first_audit_id,omitempty"`
	LastAudit  int64 `json:"last_audit_id,omitempty"`
}

// RejectBulk rejects every open record of the selection (up to the
// preview's MaxID) with one reason, in transactions of opts.Batch records,
// each record with its own audit row. A cancelled context stops it between
// batches (a batch under way commits: context.WithoutCancel), with
// Interrupted set; a rerun decides what is left, never a record twice.
func RejectBulk(ctx context.Context, db DB, sel Selection, opts BulkOptions) (BulkResult, error) {
	if err := checkDecision(opts.Operator, opts.Reason); err != nil {
		return BulkResult{}, err
	}
	if opts.Batch == 0 {
		opts.Batch = DefaultBatch
	}
	if opts.Batch < 1 || opts.Batch > MaxBatch {
		return BulkResult{}, fmt.Errorf("%w: --batch must be between 1 and %d", ErrInvalidFilter, MaxBatch)
	}
	f := sel.Filter
	f.Status, f.After = StatusOpen, nil
	if sel.IDs == nil && !f.Narrowed() {
		return BulkResult{}, fmt.Errorf("%w: a bulk decision needs a filter or ids", ErrInvalidFilter)
	}
	if err := f.Validate(); err != nil {
		return BulkResult{}, err
	}
	res := BulkResult{Run: newRunLabel()}
	ids := uniqueIDs(sel.IDs)
	var after int64
	for {
		if ctx.Err() != nil {
			res.Interrupted = true
			return res, nil
		}
		var batch []int64
		if sel.IDs != nil {
			n := min(opts.Batch, len(ids))
			batch, ids = ids[:n], ids[n:]
		} else {
			var err error
			if batch, err = nextBatch(ctx, db, f, opts.MaxID, after, opts.Batch); err != nil {
				if ctx.Err() != nil {
					res.Interrupted = true // cancelled while looking: nothing of this batch was sent
					return res, nil
				}
				return res, err
			}
		}
		if len(batch) == 0 {
			return res, nil
		}
		after = batch[len(batch)-1]
		if err := rejectBatch(context.WithoutCancel(ctx), db, batch, opts, &res); err != nil {
			return res, err
		}
		if opts.Progress != nil {
			opts.Progress(res)
		}
	}
}

func nextBatch(ctx context.Context, q idem.DBTX, f Filter, maxID, after int64, n int) ([]int64, error) {
	args := f.args()
	if maxID > 0 {
		args["max_id"] = maxID
	}
	args["after_id"], args["limit"] = after, n
	rows, err := q.Query(ctx, bulkNextSQL, pgx.QueryExecModeExec, args)
	if err != nil {
		return nil, fmt.Errorf("bulk: next batch: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("bulk: next batch: %w", err)
	}
	return ids, nil
}

func rejectBatch(ctx context.Context, db idem.TxBeginner, batch []int64, opts BulkOptions, res *BulkResult) error {
	var decided, skipped, first, last int64
	err := inTx(ctx, db, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, rejectBatchSQL, batch, opts.Operator, opts.Reason, res.Run)
		if err != nil {
			return mapError(err)
		}
		var id int64
		var outcome string
		var auditID *int64
		_, err = pgx.ForEachRow(rows, []any{&id, &outcome, &auditID}, func() error {
			switch outcome {
			case "rejected":
				decided++
				if first == 0 {
					first = *auditID
				}
				last = *auditID
			case "not_found":
				return fmt.Errorf("%w: record %d vanished", ErrNotFound, id)
			default:
				skipped++
			}
			return nil
		})
		return mapError(err)
	})
	if err != nil {
		return fmt.Errorf("bulk reject (batch of %d from id %d, %d decided before it): %w", len(batch), batch[0], res.Decided, err)
	}
	res.Decided += decided
	res.Skipped += skipped
	res.Batches++
	if res.FirstAudit == 0 {
		res.FirstAudit = first
	}
	if last != 0 {
		res.LastAudit = last
	}
	return nil
}

// newRunLabel labels a bulk run: the time and a random part.
func newRunLabel() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "bulk-" + time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}
