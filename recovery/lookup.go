package recovery

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemctl/idemctl/idem"
)

var (
	//go:embed sql/lookup.sql
	lookupSQL string
	//go:embed sql/probe_only.sql
	probeOnlySQL string
)

// ProbeOnlyStatement is sql/probe_only.sql, which makes the rest of its
// transaction plan a batched lookup as primary-key probes, one a key;
// reconcile's batched lookup runs it too.
func ProbeOnlyStatement() string { return probeOnlySQL }

// found is what the lookup says of an identity that exists.
type found struct {
	stored, storedClass *string
	noResponse          bool
	// purged: only the tombstone is left (the body was purged).
	purged bool
	// response is the saved response, for a real run's already_applied.
	response []byte
	// stale: the body is missing in a snapshot taken before a purge swap
	// committed, which it cannot see through: not an answer, look again.
	stale bool
	// entryPlan is the plan that entered the identity without its effect
	// (record plan, or import: enteredBy "import"); nil when it was applied.
	entryPlan *int64
	enteredBy *string
}

// errStaleSnapshot: lookups kept meeting purge swaps.
var errStaleSnapshot = errors.New("the lookup's snapshot kept predating a purge swap of the identity's day; run it again")

// lookup answers a dry-run batch: step 1 (primary check) and the batch query
// pipelined in one round trip. A connection failure is retried like a real
// run's (the lookup is read-only); a refusal, or a database that stays
// unreachable, is returned as an error with the batch unanswered. Any other
// failed query fails the batch's operations.
func (r *Resolver) lookup(ctx context.Context, stop <-chan struct{}, b []job, win *window) error {
	wait := r.backoff()
	skip := func() {
		for _, j := range b {
			win.done(j.pos, Result{skipped: true})
		}
	}
	var hits map[int32]found
	var held map[int32]error
	var err error
	for tries := 1; ; tries++ {
		hits, _, err = r.lookupOnce(ctx, b)
		if err == nil && !(anyStale(hits) && tries < 3) {
			// in the same loop: a connection lost here is waited out too
			held, err = r.heldByEntryPlans(ctx, b, hits)
		}
		var lost *lostError
		if isNotPrimary(err) {
			skip()
			return err
		}
		if err == nil && anyStale(hits) && tries < 3 {
			continue // a new statement, a new snapshot
		}
		if !errors.As(err, &lost) {
			r.reachable()
			break
		}
		if werr := wait.again(lost.err, stop); werr != nil {
			skip()
			if werr == errStopped {
				return nil
			}
			return werr
		}
	}
	for i, j := range b {
		res := j.result()
		if err != nil {
			res.Outcome, res.Err = Failed, fmt.Errorf("%w; nothing concluded (a dry run writes nothing)", err)
			win.done(j.pos, res)
			continue
		}
		f, ok := hits[int32(i+1)]
		switch {
		case f.stale:
			res.Outcome, res.Err = Failed, errStaleSnapshot
		case !ok && held[int32(i+1)] != nil:
			// The real run refuses it in its transaction: so does this.
			res.Outcome, res.Err = Failed, held[int32(i+1)]
		case !ok && j.inputOther != 0:
			res.Outcome, res.Note = Conflict, inputConflictNote(j.inputOther)
		case !ok && cannotRun(j) != nil:
			res.Outcome, res.Err = Failed, cannotRun(j)
		case !ok && j.redrive != nil:
			// The provider refused this payload's key before: the real run
			// answers from that record and sends nothing; so does this.
			if refused, rerr := r.refusedBefore(ctx, j); rerr != nil {
				res.Outcome, res.Err = Failed, fmt.Errorf("%w; nothing concluded (a dry run writes nothing)", rerr)
			} else if refused.Outcome != "" {
				res = refused
			} else {
				res.Outcome, res.Conditional = WouldRedrive, true
			}
		case !ok:
			res.Outcome, res.Conditional = WouldApply, true
		case f.answers(&res):
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

// heldByEntryPlans names, by 1-based position in b, the absent identities
// that an entry plan not yet run holds (it enters them without their
// effect): the real run refuses them (idem.entry_pending_check), with
// this error.
func (r *Resolver) heldByEntryPlans(ctx context.Context, b []job, hits map[int32]found) (map[int32]error, error) {
	var tenants, ops []string
	var pos []int32
	for i, j := range b {
		if _, ok := hits[int32(i+1)]; !ok {
			tenants, ops, pos = append(tenants, j.p.TenantID), append(ops, j.p.OperationID), append(pos, int32(i+1))
		}
	}
	if len(pos) == 0 {
		return nil, nil
	}
	rows, err := r.Pool.Query(ctx, entryPendingSQL, tenants, ops)
	if err != nil {
		if connectionFailure(err) {
			return nil, &lostError{err: fmt.Errorf("entry plans not yet run: %w", err)}
		}
		return nil, fmt.Errorf("entry plans not yet run: %w", err)
	}
	held := map[int32]error{}
	var ord int32
	var plan int64
	var kind, state string
	_, err = pgx.ForEachRow(rows, []any{&ord, &plan, &kind, &state}, func() error {
		j := b[pos[ord-1]-1]
		held[pos[ord-1]] = fmt.Errorf("%w: %s plan %d (%s) holds (%s, %s), to enter without its effect: its effect does not run here; run the plan first (idemctl %s %s %d), or abort it",
			ErrHeldByEntryPlan, kind, plan, state, j.p.TenantID, j.p.OperationID, kind, nextEntryStep(state), plan)
		return nil
	})
	if err != nil {
		if connectionFailure(err) {
			return nil, &lostError{err: fmt.Errorf("entry plans not yet run: %w", err)}
		}
		return nil, fmt.Errorf("entry plans not yet run: %w", err)
	}
	return held, nil
}

// ErrHeldByEntryPlan: an entry plan not yet run holds the identity, which
// is absent; it enters it without its effect, so the effect is not run.
var ErrHeldByEntryPlan = errors.New("held by an entry plan not yet run")

// nextEntryStep is the idemctl verb that moves an entry plan in state on.
func nextEntryStep(state string) string {
	if state == "approved" || state == "running" {
		return "run"
	}
	return "approve"
}

// answers sets res from an identity found holding this payload and class
// (purged, already_applied, or an error for one without a saved response),
// and reports false when it holds another (a conflict, left to the caller).
func (f found) answers(res *Result) bool {
	if f.stored != nil || f.storedClass != nil || f.stale {
		return false
	}
	res.StoredHash = res.IncomingHash
	switch {
	case f.purged:
		res.Outcome = Purged
	case f.noResponse:
		res.Outcome, res.Err = Failed, ErrNoSavedResponse
	default:
		res.Outcome, res.Response = AlreadyApplied, f.response
		if f.entryPlan != nil {
			res.Note, res.EntryPlan = enteredWithoutEffect(*f.entryPlan, f.enteredBy), *f.entryPlan
		}
	}
	return true
}

// enteredWithoutEffect is the note of an identity an entry plan entered
// (inspect says the same): already_applied, but its effect never ran here.
func enteredWithoutEffect(plan int64, enteredBy *string) string {
	how := "recorded by hand"
	if enteredBy != nil && *enteredBy == "import" {
		how = "imported"
	}
	return fmt.Sprintf("%s under entry plan %d: its effect never ran here (the outcome was known from outside; idemctl inspect shows it)", how, plan)
}

// lookupOnce sends one batch lookup. A connection failure comes back as a
// *lostError.
// A real run's lookup also returns the saved responses, and the primary's
// clock at step 1.
func (r *Resolver) lookupOnce(ctx context.Context, b []job) (hits map[int32]found, clock time.Time, err error) {
	n := len(b)
	keys, err := lookupKeysOf(b)
	if err != nil {
		return nil, clock, err
	}
	c, err := r.Pool.Acquire(ctx)
	if err != nil {
		return nil, clock, &lostError{err: fmt.Errorf("acquire a connection: %w", err)}
	}
	defer func() {
		if err != nil && !isNotPrimary(err) && (connectionFailure(err) || c.Conn().PgConn().IsClosed()) {
			err = &lostError{err: err, sent: true}
		}
		c.Release()
	}()
	hits = make(map[int32]found, n/2)
	// One round trip: a transaction whose plans are probes (not READ ONLY:
	// the primary check reads transaction_read_only).
	var batch pgx.Batch
	batch.Queue("BEGIN")
	batch.Queue(probeOnlySQL)
	batch.Queue(primarySQL)
	batch.Queue(lookupSQL, keys.tenants, keys.ops, keys.digests, keys.classes, !r.DryRun)
	batch.Queue("COMMIT")
	br := c.Conn().SendBatch(ctx, &batch)
	defer br.Close()
	for range 2 {
		if _, err := br.Exec(); err != nil {
			return nil, clock, fmt.Errorf("look up %d identities: %w", n, err)
		}
	}
	if clock, err = CheckPrimary(ctx, batchRow{br}); err != nil {
		return nil, clock, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, clock, fmt.Errorf("look up %d identities: %w", n, err)
	}
	defer rows.Close()
	var ord int32
	var f found
	for rows.Next() {
		f = found{}
		if err := rows.Scan(&ord, &f.stored, &f.storedClass, &f.noResponse, &f.purged, &f.stale, &f.response, &f.entryPlan, &f.enteredBy); err != nil {
			return nil, clock, fmt.Errorf("look up %d identities: %w", n, err)
		}
		if ord < 1 || int(ord) > n {
			return nil, clock, fmt.Errorf("look up %d identities: position %d out of range", n, ord)
		}
		hits[keys.order[ord-1]+1] = f // back to the position in b
	}
	if err := rows.Err(); err != nil {
		return nil, clock, fmt.Errorf("look up %d identities: %w", n, err)
	}
	rows.Close()
	if _, err := br.Exec(); err != nil {
		return nil, clock, fmt.Errorf("look up %d identities: %w", n, err)
	}
	if err := br.Close(); err != nil {
		return nil, clock, fmt.Errorf("look up %d identities: %w", n, err)
	}
	return hits, clock, nil
}

// lookupKeys are a batch's keys as the lookup's arrays, in primary-key order:
// order[i] is the position in the batch of the i-th key.
type lookupKeys struct {
	order                 []int32
	tenants, ops, classes []string
	digests               [][]byte
}

func lookupKeysOf(b []job) (lookupKeys, error) {
	n := len(b)
	// Keys go in primary-key order (the columns' collation is byte order), so
	// that consecutive probes descend to the same or the next index pages.
	order := make([]int32, n)
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(x, y int32) int {
		if c := strings.Compare(b[x].p.TenantID, b[y].p.TenantID); c != 0 {
			return c
		}
		return strings.Compare(b[x].p.OperationID, b[y].p.OperationID)
	})
	tenants, ops, classes := make([]string, n), make([]string, n), make([]string, n)
	digests := make([][]byte, n)
	raw := make([]byte, n*sha256.Size)
	for i, k := range order {
		j := b[k]
		tenants[i], ops[i], classes[i] = j.p.TenantID, j.p.OperationID, j.p.Class
		// The digest as 32 bytes, not 75 characters of text.
		d := raw[i*sha256.Size : (i+1)*sha256.Size]
		if _, err := hex.Decode(d, []byte(strings.TrimPrefix(j.p.Hash, idem.HashPrefix))); err != nil {
			return lookupKeys{}, fmt.Errorf("line %d: hash %s: %w", j.line, j.p.Hash, err)
		}
		digests[i] = d
	}
	return lookupKeys{order: order, tenants: tenants, ops: ops, classes: classes, digests: digests}, nil
}

func anyStale(hits map[int32]found) bool {
	for _, f := range hits {
		if f.stale {
			return true
		}
	}
	return false
}

// batchRow lets CheckPrimary read the first result of a pipelined batch.
type batchRow struct{ br pgx.BatchResults }

func (b batchRow) QueryRow(context.Context, string, ...any) pgx.Row { return b.br.QueryRow() }
