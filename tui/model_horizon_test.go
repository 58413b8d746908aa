package tui

import (
	"context"
	"strconv"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/quarantine"
	"github.com/idemctl/idemctl/tui/horizonview"
	"github.com/idemctl/idemctl/tui/styles"
)

// The audit and horizon screens driven through the root model (the harness:
// model_test.go).

func TestModelAudit(t *testing.T) {
	t.Parallel()
	h := setup(t)
	qid := seedConflict(t, h.pool, "acme", "charge-42", transfer100, transfer1000)
	_, err := quarantine.Reject(context.Background(), h.pool, qid, "bob", "duplicate")
	require.NoError(t, err)
	h.init()
	h.keys("4")
	v := h.view()
	assert.Contains(t, v, "chain intact")
	assert.Contains(t, v, "quarantine.reject")
	assert.Contains(t, v, "bob")
	h.keys("enter")
	assert.Contains(t, h.view(), "details {")
	h.keys("esc")
	assert.NotContains(t, h.view(), "details {")
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// The horizon actions, driven through the model. Package horizon is not on
// main yet, so the service is the fixed one of the golden tests; the four-eyes
// rule is the service's answer (horizonview.ErrSameOperator), which the view must show.
func TestModelHorizonActions(t *testing.T) {
	t.Parallel()
	hz := newFixedHorizon()
	for _, c := range []struct {
		operator string
		want     string
		state    horizonview.PlanState
	}{
		{"alice", "refused: you planned purge #3; another person must approve it", horizonview.PlanPlanned},
		{"bob", "ok: plan #3 approved; it can now be purged", horizonview.PlanApproved},
	} {
		h := &harness{t: t, m: goldenModel(goldenSetup{horizon: hz, operator: c.operator})}
		h.send(tea.WindowSizeMsg{Width: 80, Height: 24})
		h.init()
		h.keys("3")
		require.Contains(t, h.view(), "FIN-2026-114")
		h.keys("a")
		require.Contains(t, h.view(), "Confirm: approve purge plan #3")
		h.keys("y")
		assert.Contains(t, h.view(), c.want)
		plans, err := hz.Plans(context.Background())
		require.NoError(t, err)
		assert.Equal(t, c.state, plans[0].State, c.operator)
	}

	// Only an approved plan is purged; its progress shows, then why it stopped.
	h := &harness{t: t, m: goldenModel(goldenSetup{horizon: hz, operator: "bob"})}
	h.send(tea.WindowSizeMsg{Width: 80, Height: 24})
	h.init()
	h.keys("3", "down", "down", "p")
	assert.Contains(t, h.view(), "plan #1 is aborted: only an approved plan can be purged")
	h.keys("up", "p", "y")
	v := h.view()
	assert.Contains(t, v, "purge #2 ")
	assert.Contains(t, v, "2500/5000")
	assert.Contains(t, v, "aborted after 2500 identities: horizon moved")
}

// The horizon view over package horizon and a real database: the planner's
// approval is refused (four eyes), another operator approves, the purge runs
// with its progress, and a purge whose horizon moved is aborted with why.
func TestModelHorizonDatabase(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewPool(t, 6)
	// bob is another person (four eyes compares persons, not labels).
	bob := dbtest.PoolAs(t, dsn, dbtest.Operator2, 6)
	ctx := context.Background()
	// A horizon class (a rebuildable projection) with identities ten days old.
	dbtest.RegisterAppClass(t, dsn, "proj.view", "horizon")
	seed := func(prefix string, n int) {
		dbtest.Seed(t, dsn, "proj.view", "t1", prefix, n, 10*24*time.Hour, time.Second)
	}
	seed("a-", 40)
	var now time.Time
	require.NoError(t, pool.QueryRow(ctx, "SELECT now()").Scan(&now))
	plan, err := horizon.MakePlan(ctx, pool, horizon.PlanOptions{Class: "proj.view", Before: now.Add(-24 * time.Hour), Operator: "alice", AcceptUnbounded: true})
	require.NoError(t, err)
	require.EqualValues(t, 40, plan.Candidates)

	console := func(operator string) *harness {
		st := styles.Ascii()
		p := pool
		if operator == "bob" {
			p = bob
		}
		h := &harness{t: t, pool: p, m: New(Options{
			Services: PoolServices(p), Operator: operator, Database: "test",
			Now: func() time.Time { return now }, Styles: &st, Refresh: -1, StepDelay: -1, Timeout: 20 * time.Second,
		})}
		h.send(tea.WindowSizeMsg{Width: 100, Height: 30})
		h.init()
		h.keys("3")
		return h
	}
	state := func(id int64) horizon.Plan {
		t.Helper()
		p, err := horizon.GetPlan(ctx, pool, id)
		require.NoError(t, err)
		return p
	}

	h := console("alice")
	v := h.view()
	assert.Contains(t, v, "#"+itoa(plan.ID))
	assert.Contains(t, v, "proj.view")
	assert.Contains(t, v, "planned")
	assert.Contains(t, v, "manual", "the built-in source of pending corrections, with its probe")
	h.keys("a", "y")
	assert.Contains(t, h.view(), "refused: you planned purge #"+itoa(plan.ID)+"; another person must approve it")
	assert.Equal(t, horizon.StatePlanned, state(plan.ID).State)

	h = console("bob")
	h.keys("a", "y")
	assert.Contains(t, h.view(), "ok: plan #"+itoa(plan.ID)+" approved; it can now be purged")
	assert.Equal(t, "bob", state(plan.ID).ApprovedBy)
	// Four eyes are persons: the view names each with the login it used.
	alice, bobWho := "alice ("+string(dbtest.Operator)+")", "bob ("+string(dbtest.Operator2)+")"
	v = h.view()
	assert.Contains(t, v, "planned "+alice)
	assert.Contains(t, v, "approved "+bobWho)
	h.keys("p", "y")
	v = h.view()
	assert.Contains(t, v, "ok: purge #"+itoa(plan.ID)+" done: 40 identities purged")
	assert.Contains(t, v, "40/40")
	assert.Contains(t, v, "ran "+bobWho, "who ran it stays after the purge finished")
	assert.Equal(t, horizon.StateDone, state(plan.ID).State)
	done := state(plan.ID)
	assert.Equal(t, []string{"alice", string(dbtest.Operator), "bob", string(dbtest.Operator2), "bob", string(dbtest.Operator2)},
		[]string{done.PlannedPerson, done.PlannedDBUser, done.ApprovedPerson, done.ApprovedDBUser, done.RanPerson, done.RanDBUser})

	// The horizon moves after approval: a source now holds an older message.
	seed("b-", 10)
	plan2, err := horizon.MakePlan(ctx, pool, horizon.PlanOptions{Class: "proj.view", Before: now.Add(-24 * time.Hour), Operator: "alice", AcceptUnbounded: true})
	require.NoError(t, err)
	_, err = horizon.Approve(ctx, bob, plan2.ID, "bob")
	require.NoError(t, err)
	require.NoError(t, horizon.AddSource(ctx, pool, horizon.Source{Name: "late-dlq", Kind: horizon.KindPostgres,
		Config: horizon.SourceConfig{DSN: dbtest.SourceDSN(dsn), PasswordEnv: dbtest.SourcePasswordEnv,
			Query: "SELECT now() - interval '30 days'"}}, "carol"))
	h = console("bob")
	h.keys("p", "y")
	v = h.view()
	assert.Contains(t, v, "warning: purge #"+itoa(plan2.ID)+" aborted")
	assert.Contains(t, v, "late-dlq")
	p2 := state(plan2.ID)
	assert.Equal(t, horizon.StateAborted, p2.State)
	assert.NotEmpty(t, p2.AbortReason)
	var left int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM idem.inbox WHERE operation_id LIKE 'b-%'").Scan(&left))
	assert.Equal(t, 10, left, "an aborted purge deletes nothing")
}

// The resolve view shows the re-drive step of a class whose effect lives in
// a service: what was sent, the replies, and what the primary says.
