package horizon_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// bodyRow is one body of the seeded inbox, as the model sees it.
type bodyRow struct {
	class   string
	created time.Time
}

// modelCandidates is what a purge plan of class with cutoff must cover: the
// bodies of that class, and no other, created before the cutoff (the classes
// here have no min-age, no pins and no quarantine holds).
func modelCandidates(rows []bodyRow, class string, cutoff time.Time) int64 {
	var n int64
	for _, r := range rows {
		if r.class == class && r.created.Before(cutoff) {
			n++
		}
	}
	return n
}

// The horizon's candidates (what a plan says it would purge) filter by class
// and cutoff exactly: random inboxes over three tenants and three horizon
// classes, random plans, compared with a plain Go model of the same filter.
func TestHorizonCandidatesMatchModel(t *testing.T) {
	t.Parallel()
	f := setup(t)
	classes := []string{projClass, "proj.a", "proj.b"}
	for _, c := range classes[1:] {
		dbtest.RegisterAppClass(t, f.dsn, c, "horizon")
	}
	seed := time.Now().UnixNano()
	t.Logf("data seed %d", seed)
	for i, c := range classes {
		for j, tenant := range []string{"t1", "t2", "t10"} {
			k := int(seed>>(i*3+j)) & 7
			n := 12 + k*3 // at least 108 rows over the nine (class, tenant) pairs
			age := time.Duration(2+(i*5+j*3+k)%17) * 24 * time.Hour
			f.seed(c, tenant, fmt.Sprintf("%s-%d-", c, j), n, age, time.Duration(3+k)*time.Hour)
		}
	}
	rows, err := f.pool.Query(f.ctx, "SELECT op_class, created_at FROM idem.inbox")
	require.NoError(t, err)
	data, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (bodyRow, error) {
		var b bodyRow
		return b, r.Scan(&b.class, &b.created)
	})
	require.NoError(t, err)
	require.Greater(t, len(data), 100)

	now := f.primaryNow()
	cases := 0
	prop := func(rt *rapid.T) {
		class := rapid.SampledFrom(classes).Draw(rt, "class")
		back := time.Duration(rapid.IntRange(1, 20*24).Draw(rt, "hours back")) * time.Hour
		p, err := horizon.MakePlan(f.ctx, f.pool, horizon.PlanOptions{Class: class, Before: now.Add(-back),
			Operator: "alice", AcceptUnbounded: true})
		if err != nil {
			rt.Fatalf("plan %s before %s: %v", class, back, err)
		}
		if want := modelCandidates(data, class, p.Cutoff); p.Candidates != want {
			rt.Fatalf("plan %d of %s, cutoff %s: %d candidates, the model says %d", p.ID, class, p.Cutoff, p.Candidates, want)
		}
		cases++
	}
	// Two rounds of rapid's default 100 cases: at least 200 plans.
	rapid.Check(t, prop)
	rapid.Check(t, prop)
	require.GreaterOrEqual(t, cases, 200)
}
