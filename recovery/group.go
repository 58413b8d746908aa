package recovery

import (
	"context"
	"errors"
	"hash/maphash"
	"sync/atomic"
	"time"
)

// A real run's worker takes what is queued for it (up to maxGroup
// operations, the same identities always reaching the same worker, in input
// order) and answers the identities already there from one batched lookup,
// as the dry run does: steps 1, 2 and 5 are reads, so a rerun after a crash
// costs a lookup, not a transaction, per line. The rest run the protocol one
// by one (applyOne): an absent identity is applied (or re-driven), a
// conflicting one quarantined, and the executor still settles every race.
//
// A lookup is one read on the primary's snapshot: an identity found there was
// committed with its effect and its saved response, so answering
// already_applied from it is step 2 exactly (an identity without its body
// runs the protocol: the executor tells a purge from damage). Within a group,
// only the first line of an identity is answered from the lookup; a later
// line runs the protocol, since the earlier one may have changed what is
// there.

// nextGroup blocks for one job, then takes what else is queued, up to max.
// more is false once q is closed and drained.
func nextGroup(q <-chan job, max int) (g []job, more bool) {
	j, ok := <-q
	if !ok {
		return nil, false
	}
	g = append(make([]job, 0, 8), j)
	for len(g) < max {
		select {
		case j, ok := <-q:
			if !ok {
				return g, false
			}
			g = append(g, j)
		default:
			return g, true
		}
	}
	return g, true
}

// lookAhead decides whether a group is worth a lookup. For a class re-driven
// through its service it always is (it replaces the per-operation read before
// the send). For SQL effects the executor's own transaction settles an
// operation in one round trip anyway, so a lookup only pays when some
// identities are already there: it is skipped for a lone operation and,
// while recent lookups found (almost) nothing, for all but one group in
// eight, which keeps measuring.
type lookAhead struct {
	groups int
	// hitRate is the share of looked-up identities found, smoothed; it
	// starts at 1, as a rerun would.
	hitRate float64
	started bool
}

func (la *lookAhead) want(g []job) bool {
	la.groups++
	for _, j := range g {
		if j.redrive != nil && j.idempotent {
			return true
		}
	}
	if len(g) < 2 {
		return false
	}
	return !la.started || la.hitRate >= 0.05 || la.groups%8 == 0
}

func (la *lookAhead) saw(looked, hits int) {
	rate := float64(hits) / float64(looked)
	if !la.started {
		la.hitRate, la.started = rate, true
		return
	}
	la.hitRate = 0.7*la.hitRate + 0.3*rate
}

// runGroup answers one worker's group: one lookup when it pays, then the
// protocol for each operation the lookup did not answer.
func (r *Resolver) runGroup(ctx context.Context, stopCtx context.Context, g []job, ahead *lookAhead,
	win *window, fail func(error), unknown *atomic.Int64) {
	skipFrom := func(i int) {
		for _, j := range g[i:] {
			win.done(j.pos, Result{skipped: true})
		}
	}
	if stopCtx.Err() != nil {
		skipFrom(0)
		return
	}
	var hits map[int32]found
	var clk primaryClock
	looked := false
	if ahead.want(g) {
		if !r.lookups.wait(stopCtx, len(g)) {
			skipFrom(0)
			return
		}
		var err error
		var at time.Time
		hits, at, err = r.lookupOnce(ctx, g)
		clk = clockFrom(at)
		switch {
		case isNotPrimary(err):
			fail(err)
			skipFrom(0)
			return
		case err == nil:
			looked = true
			ahead.saw(len(g), len(hits))
		}
		// Any other failure (a lost connection): each operation runs the
		// protocol, with its retries.
	}
	var firsts map[uint64]struct{}
	if looked && len(g) > 1 {
		firsts = make(map[uint64]struct{}, len(g))
	}
	seed := maphash.MakeSeed()
	for i, j := range g {
		if stopCtx.Err() != nil {
			skipFrom(i)
			return
		}
		var absent *primaryClock
		if looked {
			first := true
			if firsts != nil {
				k := identityKey(seed, j.p.TenantID, j.p.OperationID)
				_, seen := firsts[k]
				firsts[k], first = struct{}{}, !seen
			}
			if first {
				res := j.result()
				f, ok := hits[int32(i+1)]
				// A missing body is left to the executor, which tells a
				// purge from damage (IX305).
				if ok && !f.purged && f.answers(&res) {
					win.done(j.pos, res)
					continue
				}
				if !ok {
					absent = &clk
				}
			}
		}
		res, err := r.applyOne(ctx, stopCtx.Done(), j, absent)
		if err != nil {
			if !errors.Is(err, errStopped) {
				fail(err)
			}
			if res.Outcome == "" {
				if res.unknown {
					unknown.Add(1)
				}
				res = Result{skipped: true}
			}
		}
		win.done(j.pos, res)
	}
}
