package recovery

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/jackc/pgx/v5"
)

//go:embed sql/lookup.sql
var lookupSQL string

// lookup answers a dry-run batch in one round trip: step 1 (primary check)
// and the batch query are pipelined. Only a refusal is returned as an error;
// a failed query fails the batch's operations.
func (r *Resolver) lookup(ctx context.Context, b []job, win *window) error {
	n := len(b)
	tenants, ops, hashes, classes := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	for i, j := range b {
		tenants[i], ops[i], hashes[i], classes[i] = j.p.TenantID, j.p.OperationID, j.p.Hash, j.p.Class
	}
	type found struct {
		stored, storedClass *string
	}
	hits := make(map[int32]found, n/2)
	var batch pgx.Batch
	batch.Queue(primarySQL)
	batch.Queue(lookupSQL, tenants, ops, hashes, classes)
	err := func() error {
		br := r.Pool.SendBatch(ctx, &batch)
		defer br.Close()
		if _, err := CheckPrimary(ctx, batchRow{br}); err != nil {
			return err
		}
		rows, err := br.Query()
		if err != nil {
			return fmt.Errorf("look up %d identities: %w", n, err)
		}
		defer rows.Close()
		var ord int32
		var f found
		for rows.Next() {
			if err := rows.Scan(&ord, &f.stored, &f.storedClass); err != nil {
				return fmt.Errorf("look up %d identities: %w", n, err)
			}
			hits[ord] = f
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("look up %d identities: %w", n, err)
		}
		return br.Close()
	}()
	if isNotPrimary(err) {
		for _, j := range b {
			win.done(j.pos, Result{skipped: true})
		}
		return err
	}
	for i, j := range b {
		res := j.result()
		if err != nil {
			res.Outcome, res.Err = Failed, err
			win.done(j.pos, res)
			continue
		}
		f, ok := hits[int32(i+1)]
		switch {
		case !ok:
			res.Outcome = WouldApply
		case f.stored == nil && f.storedClass == nil:
			res.Outcome, res.StoredHash = AlreadyApplied, res.IncomingHash
		default:
			res.Outcome, res.StoredHash = WouldConflict, res.IncomingHash
			if f.stored != nil {
				res.StoredHash = *f.stored
			}
			if f.storedClass != nil {
				res.StoredClass = *f.storedClass
			}
		}
		win.done(j.pos, res)
	}
	return nil
}

// batchRow lets CheckPrimary read the first result of a pipelined batch.
type batchRow struct{ br pgx.BatchResults }

func (b batchRow) QueryRow(context.Context, string, ...any) pgx.Row { return b.br.QueryRow() }
