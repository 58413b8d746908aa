package horizonview

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/tui/view"
)

// HorizonDB is HorizonService over package horizon.
type HorizonDB struct{ Pool *pgxpool.Pool }

// horizonPlanLimit is how many plans the view lists (newest first).
const horizonPlanLimit = 100

// Sources lists the replay sources with their last probe. Package horizon
// records a probe only as the evidence of a plan (its proof), so the last
// probe of a source is its evidence in the newest plan that has one; a source
// in no plan yet is shown "never probed" (not proven).
func (h HorizonDB) Sources(ctx context.Context) ([]HorizonSource, error) {
	return view.Cleaned(h.sources(ctx))
}

func (h HorizonDB) sources(ctx context.Context) ([]HorizonSource, error) {
	sources, err := horizon.ListSources(ctx, h.Pool)
	if err != nil {
		return nil, err
	}
	plans, err := horizon.ListPlans(ctx, h.Pool, "", horizonPlanLimit)
	if err != nil {
		return nil, err
	}
	out := make([]HorizonSource, 0, len(sources))
	for _, s := range sources {
		hs := HorizonSource{Name: s.Name, Kind: string(s.Kind), Result: "never probed", Detail: s.Describe()}
		for _, p := range plans { // newest first
			ev, ok := evidenceFor(p, s.Name)
			if !ok {
				continue
			}
			hs.ProbedAt, hs.Result = p.PlannedAt, string(ev.Verdict)
			hs.Proven = ev.Verdict == horizon.VerdictClosed
			hs.Detail = evidenceDetail(ev)
			break
		}
		out = append(out, hs)
	}
	return out, nil
}

func evidenceFor(p horizon.Plan, source string) (horizon.Evidence, bool) {
	for _, ev := range p.Proof {
		if ev.Source == source {
			return ev, true
		}
	}
	return horizon.Evidence{}, false
}

// evidenceDetail says in a few words what a probe found.
func evidenceDetail(ev horizon.Evidence) string {
	switch {
	case ev.Reason != "":
		return ev.Reason
	case ev.Mode == horizon.Enumerating:
		return fmt.Sprintf("enumerated %d, pinned %d", ev.Enumerated, ev.Pinned)
	case ev.Oldest != nil:
		return "oldest " + view.Stamp(*ev.Oldest)
	case ev.Where != "":
		return ev.Where
	}
	return "nothing to replay"
}

// proofLines says what each source's probe found when the plan was made.
func proofLines(p horizon.Plan) []string {
	out := make([]string, 0, len(p.Proof))
	for _, ev := range p.Proof {
		out = append(out, fmt.Sprintf("%s: %s, %s", ev.Source, ev.Verdict, evidenceDetail(ev)))
	}
	return out
}

// heldBack says what holds a plan's pinned identities out of its purge,
// each holder with its count (they add up to the total): a replay source,
// the pending manual corrections, or the quarantine records that keep
// their evidence.
func heldBack(p horizon.Plan) string {
	if p.Pinned == 0 && len(p.PinnedBy) == 0 {
		return ""
	}
	parts := make([]string, 0, len(p.PinnedBy))
	for _, h := range p.PinnedBy {
		part := fmt.Sprintf("%s %d", h.HeldBy, h.Identities)
		switch h.HeldBy {
		case "quarantine":
			part += " (open or rejected records)"
		case "manual":
			part += " (pending corrections)"
		}
		parts = append(parts, part)
	}
	return fmt.Sprintf("%d: %s", p.Pinned, strings.Join(parts, ", "))
}

// Plans lists the purge plans, newest first.
func (h HorizonDB) Plans(ctx context.Context) ([]PurgePlan, error) {
	return view.Cleaned(h.plans(ctx))
}

func (h HorizonDB) plans(ctx context.Context) ([]PurgePlan, error) {
	plans, err := horizon.ListPlans(ctx, h.Pool, "", horizonPlanLimit)
	if err != nil {
		return nil, err
	}
	out := make([]PurgePlan, 0, len(plans))
	for _, p := range plans {
		scope := p.Class
		if p.Action == horizon.ActionDropTombstones {
			scope += " (tombstones)"
		}
		out = append(out, PurgePlan{
			ID: p.ID, Scope: scope, Before: p.Cutoff, State: PlanState(p.State), Identities: p.Candidates, Purged: p.Purged,
			PlannedBy: Who{p.PlannedPerson, p.PlannedDBUser}, PlannedAt: p.PlannedAt,
			ApprovedBy: Who{p.ApprovedPerson, p.ApprovedDBUser}, RanBy: Who{p.RanPerson, p.RanDBUser}, Contract: p.Contract,
			AbortReason: p.AbortReason, Proof: proofLines(p), HeldBack: heldBack(p),
		})
	}
	return out, nil
}

// Approve records the approval (horizon.Approve); the planner is refused
// with an error wrapping ErrSameOperator.
func (h HorizonDB) Approve(ctx context.Context, planID int64, operator string) error {
	_, err := horizon.Approve(ctx, h.Pool, planID, operator)
	if errors.Is(err, horizon.ErrSameOperator) {
		return fmt.Errorf("%w: %w", ErrSameOperator, err)
	}
	return err
}

// Purge executes an approved plan (horizon.Purge), which re-probes every
// source first and aborts, deleting nothing, when the horizon moved.
func (h HorizonDB) Purge(ctx context.Context, planID int64, operator string, progress func(done, total int64)) (PurgeResult, error) {
	res, err := horizon.Purge(ctx, h.Pool, planID, horizon.PurgeOptions{Operator: operator, Progress: progress})
	if err != nil {
		return PurgeResult{}, err
	}
	return PurgeResult{Purged: res.Purged, Aborted: res.Aborted, AbortReason: res.AbortReason}, nil
}
