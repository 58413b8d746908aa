package audit_test

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/idemctl/idemctl/audit"
)

// auditFilterFlags are the filters of `audit list`, one bit each in a mask.
var auditFilterFlags = []string{"--action", "--label", "--target", "--since", "--until", "--actor"}

// modelAuditList is what audit list must return: the rows matching every
// filter given, newest first.
func modelAuditList(rows []audit.Record, f audit.Filter) []int64 {
	var ids []int64
	for _, r := range rows {
		if f.Action != "" && r.Action != f.Action && !strings.HasPrefix(r.Action, f.Action+".") {
			continue
		}
		if (f.Actor != "" && r.Actor != f.Actor) || (f.Target != "" && r.Target != f.Target) ||
			(f.Who != "" && r.Person != f.Who && r.DBUser != f.Who) {
			continue
		}
		if (!f.Since.IsZero() && r.At.Before(f.Since)) || (!f.Until.IsZero() && !r.At.Before(f.Until)) {
			continue
		}
		if f.Before != 0 && r.ID >= f.Before {
			continue
		}
		ids = append(ids, r.ID)
	}
	slices.Sort(ids)
	slices.Reverse(ids)
	return ids
}

// TestAuditListFiltersMatchModel compares audit list with a plain model of
// its filters: random rows (actions sharing namespaces and prefixes, actors
// and targets that are prefixes of each other), loaded once, then random
// filter values under every combination of the flags, whole and page by page.
func TestAuditListFiltersMatchModel(t *testing.T) {
	b := setup(t, 2)
	seed := time.Now().UnixNano()
	t.Logf("data seed %d", seed)
	rnd := rand.New(rand.NewPCG(uint64(seed), 0))
	// The actions a caller may append; the template's rows add others.
	actions := []string{"resolve.run", "resolve.step", "resolve.step_x", "reconcile.run", "intake.run",
		"quarantine.export", "horizon.check"}
	actors := []string{"alice", "bob", "ali", "Alice", "carol"}
	targets := []string{"", "quarantine:1", "quarantine:12", "plan:1", "tenant-1/op-1"}
	for i := 0; i < 60; i++ {
		_, err := audit.Append(b.ctx, b.pool, audit.Entry{Actor: actors[rnd.IntN(len(actors))],
			Action: actions[rnd.IntN(len(actions))], Target: targets[rnd.IntN(len(targets))]})
		require.NoError(t, err)
	}
	// The model's data is every row the log holds (the template's rows too).
	all, err := audit.List(b.ctx, b.pool, audit.Filter{Limit: audit.MaxLimit})
	require.NoError(t, err)
	require.Greater(t, len(all), 60)
	var stamps []time.Time
	// Who did it: the persons and logins of the rows, and a prefix of one.
	whos := []string{"alic", "(no person)"}
	for _, r := range all {
		whos = append(whos, r.Person, r.DBUser)
		stamps = append(stamps, r.At, r.At.Add(time.Microsecond), r.At.Add(-time.Microsecond))
	}
	queries := 0
	prop := func(t *rapid.T) {
		var f audit.Filter
		values := func(mask int) audit.Filter {
			g := audit.Filter{Limit: audit.MaxLimit}
			if mask&1 != 0 {
				g.Action = f.Action
			}
			if mask&2 != 0 {
				g.Actor = f.Actor
			}
			if mask&4 != 0 {
				g.Target = f.Target
			}
			if mask&8 != 0 {
				g.Since = f.Since
			}
			if mask&16 != 0 {
				g.Until = f.Until
			}
			if mask&32 != 0 {
				g.Who = f.Who
			}
			return g
		}
		f.Action = rapid.SampledFrom(append(actions, "resolve", "resolve.ste", "recon", "quarantine", "horizon", "person", "class")).Draw(t, "action")
		f.Actor = rapid.SampledFrom(append(actors, "al", "nobody")).Draw(t, "actor")
		f.Target = rapid.SampledFrom(append(targets[1:], "quarantine:", "plan")).Draw(t, "target")
		f.Who = rapid.SampledFrom(whos).Draw(t, "who")
		f.Since = rapid.SampledFrom(stamps).Draw(t, "since")
		f.Until = rapid.SampledFrom(stamps).Draw(t, "until")
		// Every combination of the flags with these values.
		for mask := 0; mask < 1<<len(auditFilterFlags); mask++ {
			g := values(mask)
			got, err := audit.List(b.ctx, b.pool, g)
			queries++
			require.NoError(t, err)
			ids := make([]int64, len(got))
			for i, r := range got {
				ids[i] = r.ID
			}
			if want := modelAuditList(all, g); !slices.Equal(want, ids) {
				t.Fatalf("flags %s: audit list returned ids %v, the model %v", flagsOf(mask), ids, want)
			}
		}
		// One combination page by page, as --after pages.
		mask := rapid.IntRange(0, 1<<len(auditFilterFlags)-1).Draw(t, "paged flags")
		g := values(mask)
		want := modelAuditList(all, g)
		g.Limit = rapid.IntRange(1, 7).Draw(t, "limit")
		var ids []int64
		for {
			page, err := audit.List(b.ctx, b.pool, g)
			queries++
			require.NoError(t, err)
			for _, r := range page {
				ids = append(ids, r.ID)
			}
			if len(page) < g.Limit {
				break
			}
			g.Before = page[len(page)-1].ID
		}
		if !slices.Equal(want, ids) {
			t.Fatalf("flags %s, pages of %d: audit list returned ids %v, the model %v", flagsOf(mask), g.Limit, ids, want)
		}
	}
	for round := 0; round < 2; round++ {
		rapid.Check(t, prop)
	}
	t.Logf("%d queries", queries)
}

func flagsOf(mask int) string {
	var on []string
	for i, f := range auditFilterFlags {
		if mask&(1<<i) != 0 {
			on = append(on, f)
		}
	}
	if len(on) == 0 {
		return "(none)"
	}
	return strings.Join(on, " ")
}
