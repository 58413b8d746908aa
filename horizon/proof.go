package horizon

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemctl/idemctl/idem"
)

var (
	//go:embed sql/pinned_counts.sql
	pinnedCountsSQL string
)

// DefaultMargin is the safety margin between a source's oldest replayable
// message and the cutoff: clock skew between the source and the primary.
const DefaultMargin = 5 * time.Minute

// futureSkew is how far in the future of the primary's clock a source's
// timestamp may be before it is taken for nonsense.
const futureSkew = 5 * time.Minute

// Verdict is what a probe means for a cutoff.
type Verdict string

// Verdicts.
const (
	// VerdictClosed: the source cannot replay anything the purge would remove.
	VerdictClosed Verdict = "closed"
	// VerdictOpen: a bounding source holds a message not newer than the
	// cutoff plus the margin: it blocks that cutoff.
	VerdictOpen Verdict = "open"
	// VerdictFailed: the probe failed, timed out or returned nonsense: not
	// proven (fail closed).
	VerdictFailed Verdict = "failed"
	// VerdictProbed: probed without a cutoff to judge against (check without
	// --before); see SafeCutoff.
	VerdictProbed Verdict = "probed"
)

// Evidence is what one probe found; a plan records it for every source.
type Evidence struct {
	Source string `json:"source"`
	Kind   Kind   `json:"kind"`
	// Where the source points, without secrets.
	Where string `json:"where"`
	Mode  Mode   `json:"mode,omitempty"`
	// Oldest is the oldest replayable message time (nil: none).
	Oldest *time.Time `json:"oldest,omitempty"`
	// Enumerated is how many identities an enumerating source listed; Pinned
	// how many of them fall inside the purge range (they are excluded).
	Enumerated int64   `json:"enumerated"`
	Pinned     int64   `json:"pinned"`
	DurationMS float64 `json:"duration_ms"`
	Verdict    Verdict `json:"verdict"`
	Reason     string  `json:"reason,omitempty"`
	Detail     any     `json:"detail,omitempty"`
}

// probeEnv is what a probe gets besides its source.
type probeEnv struct {
	pool  *pgxpool.Pool
	runID string
	now   time.Time
	// pin streams one enumerated message's identity to the run's table.
	pin func(ctx context.Context, m Message) error
	// lenient hands over the messages that cannot be used (with their
	// Problem) instead of failing (intake); a proof fails closed.
	lenient bool
}

// observation is a probe's raw result.
type observation struct {
	mode       Mode
	oldest     *time.Time
	enumerated int64
	detail     any
}

type prober func(ctx context.Context, s Source, env *probeEnv) (observation, error)

// probers maps each kind to its probe (each in its own file).
var probers = map[Kind]prober{
	KindPostgres: probePostgres,
	KindArchive:  probeArchive,
	KindManual:   probeManual,
	KindNATS:     probeNATS,
	KindKafka:    probeKafka,
}

// run is one probing of every source: evidence, and the enumerated
// identities in idem.horizon_enum under runID.
type run struct {
	runID    string
	now      time.Time
	evidence []Evidence
}

// primaryNow is the primary's clock: every cutoff is computed from it, never
// from the operator's laptop.
func primaryNow(ctx context.Context, q DBTX) (time.Time, error) {
	var now time.Time
	if err := q.QueryRow(ctx, "SELECT now()").Scan(&now); err != nil {
		return time.Time{}, fmt.Errorf("read the primary's clock: %w", err)
	}
	return now, nil
}

func newRunID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = (b[6] & 0x0f) | 0x40
	b[8] = (b[8] & 0x3f) | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// probeAll probes every source at once, each under its own timeout, streaming
// enumerated identities into idem.horizon_enum. A failing probe becomes
// evidence with VerdictFailed, not an error; the error is for the run itself.
func probeAll(ctx context.Context, pool *pgxpool.Pool, sources []Source) (*run, error) {
	now, err := primaryNow(ctx, pool)
	if err != nil {
		return nil, err
	}
	r := &run{runID: newRunID(), now: now, evidence: make([]Evidence, len(sources))}
	var wg sync.WaitGroup
	for i, s := range sources {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.evidence[i] = probeOne(ctx, pool, r, s)
		}()
	}
	wg.Wait()
	return r, nil
}

func probeOne(ctx context.Context, pool *pgxpool.Pool, r *run, s Source) Evidence {
	ev := Evidence{Source: s.Name, Kind: s.Kind, Where: s.Describe()}
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = DefaultProbeTimeout
	}
	start := time.Now()
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	// Enumerated identities go to the database as they come, in batches on a
	// connection of their own: an archive of millions never sits in memory.
	rows := make(chan enumRow, 1024)
	copyDone := make(chan error, 1)
	copyCtx, cancelCopy := context.WithCancel(pctx)
	defer cancelCopy()
	go func() {
		err := storeEnumerated(copyCtx, pool, r.runID, s.Name, rows)
		for range rows {
		}
		copyDone <- err
	}()
	var count int64
	env := &probeEnv{pool: pool, runID: r.runID, now: r.now,
		pin: func(ctx context.Context, m Message) error {
			tenant, op, ts := m.Tenant, m.OperationID, m.TS
			if err := (idem.Identity{TenantID: tenant, OperationID: op}).Validate(); err != nil {
				return fmt.Errorf("nonsense identity %q/%q: %v", tenant, op, err)
			}
			if ts != nil && ts.After(r.now.Add(futureSkew)) {
				return fmt.Errorf("identity %s/%s has a time %s in the future of the primary's clock", tenant, op, ts.UTC().Format(time.RFC3339))
			}
			var tsArg *time.Time
			if ts != nil {
				t := *ts
				tsArg = &t
			}
			select {
			case rows <- enumRow{tenant: tenant, op: op, ts: tsArg}:
				count++
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}}
	var obs observation
	var err error
	if p, ok := probers[s.Kind]; ok {
		obs, err = p(pctx, s, env)
	} else {
		err = fmt.Errorf("unknown kind %q", s.Kind)
	}
	if err != nil {
		cancelCopy()
	}
	close(rows)
	copyErr := <-copyDone
	ev.DurationMS = float64(time.Since(start).Microseconds()) / 1000
	if err == nil && copyErr != nil && !errors.Is(copyErr, context.Canceled) {
		err = fmt.Errorf("store enumerated identities: %w", copyErr)
	}
	if err == nil && pctx.Err() != nil {
		err = pctx.Err()
	}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(pctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("timed out after %s: %w", timeout, err)
		}
		ev.Verdict, ev.Reason = VerdictFailed, err.Error()
		return ev
	}
	if obs.oldest != nil && obs.oldest.After(r.now.Add(futureSkew)) {
		ev.Verdict = VerdictFailed
		ev.Reason = fmt.Sprintf("nonsense: oldest replayable message at %s is in the future of the primary's clock (%s)",
			obs.oldest.UTC().Format(time.RFC3339), r.now.UTC().Format(time.RFC3339))
		return ev
	}
	ev.Mode, ev.Oldest, ev.Detail = obs.mode, obs.oldest, obs.detail
	ev.Enumerated = obs.enumerated
	if obs.mode == Enumerating && ev.Enumerated == 0 {
		ev.Enumerated = count
	}
	ev.Verdict = VerdictProbed
	return ev
}

// enumRow is one identity an enumerating probe listed.
type enumRow struct {
	tenant, op string
	ts         *time.Time
}

// enumBatch is how many enumerated identities one idem.horizon_enum_add call stores.
const enumBatch = 5000

// storeEnumerated stores what arrives on rows under run runID, in batches,
// on one connection, until rows is closed.
func storeEnumerated(ctx context.Context, pool *pgxpool.Pool, runID, source string, rows <-chan enumRow) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	var tenants, ops []string
	var ts []*time.Time
	flush := func() error {
		if len(tenants) == 0 {
			return nil
		}
		_, err := conn.Exec(ctx, "SELECT idem.horizon_enum_add($1, $2, $3, $4, $5)", runID, source, tenants, ops, ts)
		tenants, ops, ts = tenants[:0], ops[:0], ts[:0]
		return err
	}
	for row := range rows {
		tenants, ops, ts = append(tenants, row.tenant), append(ops, row.op), append(ts, row.ts)
		if len(tenants) == enumBatch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// judge sets each source's verdict for a cutoff and counts its pins inside
// the purge range (class, created_at before cutoff, body still present).
func (r *run) judge(ctx context.Context, q DBTX, class string, cutoff time.Time, margin time.Duration) error {
	rows, err := q.Query(ctx, pinnedCountsSQL, r.runID, class, cutoff)
	if err != nil {
		return fmt.Errorf("count pinned identities: %w", err)
	}
	pinned := map[string]int64{}
	for rows.Next() {
		var src string
		var n int64
		if err := rows.Scan(&src, &n); err != nil {
			return err
		}
		pinned[src] = n
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for i := range r.evidence {
		ev := &r.evidence[i]
		if ev.Verdict == VerdictFailed {
			continue
		}
		ev.Pinned = pinned[ev.Source]
		ev.Verdict = VerdictClosed
		if ev.Mode == Bounding && ev.Oldest != nil && !ev.Oldest.After(cutoff.Add(margin)) {
			ev.Verdict = VerdictOpen
			ev.Reason = fmt.Sprintf("can replay a message from %s, not newer than the cutoff %s plus the margin %s",
				ev.Oldest.UTC().Format(time.RFC3339), cutoff.UTC().Format(time.RFC3339), margin)
		}
	}
	return nil
}

// safeCutoff is the oldest bound minus the margin (the primary's now when no
// source bounds anything), and never later than now minus the class's min_age.
func (r *run) safeCutoff(margin, minAge time.Duration) time.Time {
	bound := r.now
	for _, ev := range r.evidence {
		if ev.Verdict != VerdictFailed && ev.Mode == Bounding && ev.Oldest != nil && ev.Oldest.Before(bound) {
			bound = *ev.Oldest
		}
	}
	// Strictly newer than cutoff+margin: one microsecond (the database's
	// resolution) below.
	cut := bound.Add(-margin - time.Microsecond)
	if floor := r.now.Add(-minAge); floor.Before(cut) {
		cut = floor
	}
	return cut
}

// failures lists the sources that do not prove the cutoff, with their reasons.
func (r *run) failures() []string {
	var out []string
	for _, ev := range r.evidence {
		if ev.Verdict == VerdictFailed || ev.Verdict == VerdictOpen {
			out = append(out, fmt.Sprintf("%s (%s): %s", ev.Source, ev.Verdict, ev.Reason))
		}
	}
	sort.Strings(out)
	return out
}

// unbounded reports whether no source but the manual one was probed:
// then nothing bounds or enumerates what the outside world could replay.
func (r *run) unbounded() bool {
	for _, ev := range r.evidence {
		if ev.Kind != KindManual && ev.Verdict != VerdictFailed {
			return false
		}
	}
	return true
}

// cleanup forgets the run's enumerated identities.
func (r *run) cleanup(pool *pgxpool.Pool) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _ = pool.Exec(ctx, "SELECT idem.horizon_enum_clear($1)", r.runID)
}

// CheckOptions select what Check judges.
type CheckOptions struct {
	Class string
	// Before is the requested cutoff (nil: only compute the safe cutoff).
	Before *time.Time
	// Margin is the safety margin (0: DefaultMargin).
	Margin time.Duration
}

// CheckReport is the outcome of probing every source for a class.
type CheckReport struct {
	Class string `json:"class"`
	// Now is the primary's clock when the probes started.
	Now        time.Time  `json:"now"`
	Before     *time.Time `json:"before,omitempty"`
	MarginSec  float64    `json:"margin_seconds"`
	MinAgeSec  float64    `json:"min_age_seconds"`
	SafeCutoff time.Time  `json:"safe_cutoff"`
	Evidence   []Evidence `json:"sources"`
	// Proven is true when every source is closed for the cutoff (Before, or
	// the safe cutoff) and a source besides the manual one was probed.
	Proven bool `json:"proven"`
	// Unbounded is true when no source but the manual one was probed: a
	// plan then needs --accept-unbounded-horizon.
	Unbounded bool `json:"unbounded"`
}

// Check probes every source and judges them against Before (or the safe
// cutoff). Nothing is recorded.
func Check(ctx context.Context, pool *pgxpool.Pool, o CheckOptions) (CheckReport, error) {
	pol, err := GetClass(ctx, pool, o.Class)
	if err != nil {
		return CheckReport{}, err
	}
	if o.Margin == 0 {
		o.Margin = DefaultMargin
	}
	sources, err := ListSources(ctx, pool)
	if err != nil {
		return CheckReport{}, err
	}
	r, err := probeAll(ctx, pool, sources)
	if err != nil {
		return CheckReport{}, err
	}
	defer r.cleanup(pool)
	rep := CheckReport{Class: o.Class, Now: r.now, Before: o.Before, MarginSec: o.Margin.Seconds(),
		MinAgeSec: pol.MinAge.Seconds(), SafeCutoff: r.safeCutoff(o.Margin, pol.MinAge)}
	cutoff := rep.SafeCutoff
	if o.Before != nil {
		cutoff = *o.Before
	}
	if err := r.judge(ctx, pool, o.Class, cutoff, o.Margin); err != nil {
		return CheckReport{}, err
	}
	if o.Before == nil {
		for i := range r.evidence {
			if r.evidence[i].Verdict == VerdictClosed {
				r.evidence[i].Verdict = VerdictProbed
			}
		}
	}
	rep.Evidence = r.evidence
	rep.Unbounded = r.unbounded()
	rep.Proven = len(r.failures()) == 0 && !rep.Unbounded
	return rep, nil
}

// ProbeSources probes every source once, without a class or a cutoff
// (idemctl doctor: can each be reached?). Nothing is recorded.
func ProbeSources(ctx context.Context, pool *pgxpool.Pool) ([]Evidence, error) {
	sources, err := ListSources(ctx, pool)
	if err != nil {
		return nil, err
	}
	r, err := probeAll(ctx, pool, sources)
	if err != nil {
		return nil, err
	}
	defer r.cleanup(pool)
	return r.evidence, nil
}
