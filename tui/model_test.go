package tui

import (
	"context"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/audit"
	"github.com/idemctl/idemctl/demo"
	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/quarantine"
	"github.com/idemctl/idemctl/recovery"
	"github.com/idemctl/idemctl/redrive"
	"github.com/idemctl/idemctl/tui/horizonview"
	"github.com/idemctl/idemctl/tui/queueview"
	"github.com/idemctl/idemctl/tui/styles"
)

// The model tests drive the root model without a terminal: each message goes
// through Update, and every command it returns is run (its I/O against a real
// PostgreSQL database) and its message fed back, until nothing is left.

type harness struct {
	t    *testing.T
	m    *Model
	pool *pgxpool.Pool
	dsn  string
	quit bool
}

// setup returns a model over the database services of a fresh database.
func setup(t *testing.T) *harness {
	t.Helper()
	pool, dsn := dbtest.NewPool(t, 4)
	st := styles.Ascii()
	m := New(Options{
		Services: PoolServices(pool),
		Operator: "alice", Database: "postgres@127.0.0.1:5432/test",
		Now: func() time.Time { return fixedNow }, Styles: &st,
		Refresh: -1, StepDelay: -1, Timeout: 20 * time.Second,
	})
	h := &harness{t: t, m: m, pool: pool, dsn: dsn}
	h.send(tea.WindowSizeMsg{Width: 100, Height: 30})
	return h
}

// send delivers msg and everything its commands lead to.
func (h *harness) send(msgs ...tea.Msg) {
	h.t.Helper()
	for len(msgs) > 0 {
		msg := msgs[0]
		msgs = msgs[1:]
		_, cmd := h.m.Update(msg)
		msgs = append(msgs, h.run(cmd)...)
	}
}

func (h *harness) init() {
	h.t.Helper()
	h.send(h.run(h.m.Init())...)
}

// run runs one command (and the commands of a batch) with a time bound.
func (h *harness) run(cmd tea.Cmd) []tea.Msg {
	h.t.Helper()
	if cmd == nil {
		return nil
	}
	got := make(chan tea.Msg, 1)
	go func() { got <- cmd() }()
	var msg tea.Msg
	select {
	case msg = <-got:
	case <-time.After(30 * time.Second):
		h.t.Fatal("a command did not return within 30s")
	}
	switch msg := msg.(type) {
	case nil:
		return nil
	case tea.BatchMsg:
		var out []tea.Msg
		for _, c := range msg {
			out = append(out, h.run(c)...)
		}
		return out
	case tea.QuitMsg:
		h.quit = true
		return nil
	}
	return []tea.Msg{msg}
}

func (h *harness) keys(ks ...string) {
	h.t.Helper()
	for _, k := range ks {
		h.send(keyMsg(k))
	}
}

func (h *harness) typ(s string) {
	h.t.Helper()
	for _, r := range s {
		h.send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})
	}
}

func (h *harness) view() string { return h.m.View() }

const transfer100 = `{"from":"acct-1","to":"acct-2","amount":100,"currency":"EUR"}`
const transfer1000 = `{"from":"acct-1","to":"acct-2","amount":1000,"currency":"EUR"}`

// seedConflict applies stored, then sends incoming under the same identity:
// a conflict, quarantined. It returns the quarantine id.
func seedConflict(t *testing.T, pool *pgxpool.Pool, tenant, op, stored, incoming string) int64 {
	t.Helper()
	ctx := context.Background()
	cmd := func(p string) idem.Command {
		return idem.Command{Identity: idem.Identity{TenantID: tenant, OperationID: op}, Class: "demo.transfer", Payload: []byte(p)}
	}
	res, err := idem.Execute(ctx, pool, cmd(stored))
	require.NoError(t, err)
	require.Equal(t, idem.Applied, res.Outcome)
	res, err = idem.Execute(ctx, pool, cmd(incoming))
	require.NoError(t, err)
	require.Equal(t, idem.Conflict, res.Outcome)
	return res.QuarantineID
}

func auditActions(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := audit.List(context.Background(), pool, audit.Filter{})
	require.NoError(t, err)
	var out []string
	for _, r := range rows {
		out = append(out, r.Actor+" "+r.Action+" "+r.Target)
	}
	return out
}

func TestModelQueueShowsEvidence(t *testing.T) {
	t.Parallel()
	h := setup(t)
	qid := seedConflict(t, h.pool, "acme", "charge-42", transfer100, transfer1000)
	h.init()
	v := h.view()
	assert.Contains(t, v, "acme/charge-42")
	assert.Contains(t, v, "1 record")
	assert.Contains(t, v, "alice")
	assert.Contains(t, v, "postgres@127.0.0.1:5432/test")

	h.keys("enter")
	v = h.view()
	rec, err := quarantine.Show(context.Background(), h.pool, qid)
	require.NoError(t, err)
	assert.Contains(t, v, "/amount")
	assert.Contains(t, v, "stored    100")
	assert.Contains(t, v, "incoming  1000")
	assert.Contains(t, v, rec.StoredHash)
	assert.Contains(t, v, rec.IncomingHash)
	assert.NotEqual(t, rec.StoredHash, rec.IncomingHash)

	// The list refreshes: a new conflict shows up on r.
	h.keys("esc")
	seedConflict(t, h.pool, "globex", "payout-7", transfer100, transfer1000)
	h.keys("r")
	assert.Contains(t, h.view(), "globex/payout-7")
	// And the periodic refresh (the tick's message) does the same.
	seedConflict(t, h.pool, "initech", "bet-9", transfer100, transfer1000)
	h.send(queueview.TickMsg{})
	assert.Contains(t, h.view(), "initech/bet-9")
}

// TestModelQueueHasRoomForWorkerIDs: quarantine ids minted on a Citus
// worker start at 2^48; the queue shows them whole.
func TestModelQueueHasRoomForWorkerIDs(t *testing.T) {
	t.Parallel()
	h := setup(t)
	dbtest.Admin(t, h.dsn, "ALTER TABLE idem.quarantine ALTER COLUMN id RESTART WITH 281474976710657")
	qid := seedConflict(t, h.pool, "acme", "charge-48", transfer100, transfer1000)
	require.EqualValues(t, int64(1)<<48+1, qid)
	h.init()
	assert.Contains(t, h.view(), "#281474976710657 acme/charge-48")
	h.keys("enter")
	assert.Contains(t, h.view(), "#281474976710657")
}

func TestModelReject(t *testing.T) {
	t.Parallel()
	h := setup(t)
	qid := seedConflict(t, h.pool, "acme", "charge-42", transfer100, transfer1000)
	h.init()
	h.keys("enter", "x")
	require.True(t, h.m.queue.Typing(), "the reason field has the focus")
	h.keys("q") // typed into the reason, not quit
	require.False(t, h.quit)
	h.keys("esc")
	assert.Contains(t, h.view(), "cancelled: nothing was decided")

	h.keys("x")
	h.typ("amount tampering PAY-123")
	h.keys("enter")
	assert.Contains(t, h.view(), "Confirm: reject quarantine")
	// Nothing is written before the confirmation.
	rec, err := quarantine.Show(context.Background(), h.pool, qid)
	require.NoError(t, err)
	require.Equal(t, quarantine.StatusOpen, rec.Status)

	h.keys("y")
	rec, err = quarantine.Show(context.Background(), h.pool, qid)
	require.NoError(t, err)
	assert.Equal(t, quarantine.StatusRejected, rec.Status)
	require.NotNil(t, rec.Decision)
	assert.Equal(t, "alice", rec.Decision.By)
	assert.Equal(t, "amount tampering PAY-123", rec.Decision.Reason)
	assert.Contains(t, h.view(), "ok: rejected #")
	assert.Contains(t, h.view(), "REJECTED")
	assert.Contains(t, auditActions(t, h.pool), "alice quarantine.reject quarantine:"+itoa(qid))

	// Decided: the view refuses a second decision without asking the database.
	h.keys("a")
	assert.Contains(t, h.view(), "already rejected by alice")
}

func TestModelAcceptAsNew(t *testing.T) {
	t.Parallel()
	h := setup(t)
	qid := seedConflict(t, h.pool, "acme", "charge-42", transfer100, transfer1000)
	h.init()
	h.keys("enter", "a")
	h.typ("charge-42-rev2")
	h.keys("tab")
	h.typ("corrected amount, ticket PAY-7")
	h.keys("enter")
	assert.Contains(t, h.view(), "runs as           acme/charge-42-rev2")
	h.keys("y")

	rec, err := quarantine.Show(context.Background(), h.pool, qid)
	require.NoError(t, err)
	assert.Equal(t, quarantine.StatusAccepted, rec.Status)
	require.NotNil(t, rec.Decision)
	assert.Equal(t, "charge-42-rev2", rec.Decision.NewOperationID)
	assert.Contains(t, h.view(), "accepted #"+itoa(qid)+" as new operation acme/charge-42-rev2: applied")

	// The incoming payload ran once, under the new identity.
	var hash string
	err = h.pool.QueryRow(context.Background(),
		"SELECT payload_hash FROM idem.inbox WHERE tenant_id = 'acme' AND operation_id = 'charge-42-rev2'").Scan(&hash)
	require.NoError(t, err)
	assert.Equal(t, rec.IncomingHash, hash)
}

// A refusal by the database is a message in the view: the form stays, with
// what was typed, and nothing was written.
func TestModelDatabaseRefusal(t *testing.T) {
	t.Parallel()
	h := setup(t)
	qid := seedConflict(t, h.pool, "acme", "charge-42", transfer100, transfer1000)
	// The new operation id already holds another payload.
	_, err := idem.Execute(context.Background(), h.pool, idem.Command{
		Identity: idem.Identity{TenantID: "acme", OperationID: "charge-43"}, Class: "demo.transfer", Payload: []byte(transfer100)})
	require.NoError(t, err)
	h.init()
	h.keys("enter", "a")
	h.typ("charge-43")
	h.keys("tab")
	h.typ("revision")
	h.keys("enter", "y")

	v := h.view()
	assert.Contains(t, v, "error: accept as new #"+itoa(qid)+" refused")
	assert.Contains(t, v, "charge-43")
	assert.Contains(t, v, "> reason", "back in the form")
	rec, err := quarantine.Show(context.Background(), h.pool, qid)
	require.NoError(t, err)
	assert.Equal(t, quarantine.StatusOpen, rec.Status)

	// Another operator decided meanwhile: the database refuses, the view
	// says so and shows the record as it now is.
	h.keys("esc")
	_, err = quarantine.Reject(context.Background(), h.pool, qid, "bob", "duplicate")
	require.NoError(t, err)
	h.keys("x")
	h.typ("mine")
	h.keys("enter", "y")
	v = h.view()
	assert.Contains(t, v, "error: reject #"+itoa(qid)+" refused")
	assert.Contains(t, v, "REJECTED")
}

// A database that goes away: every view reports it, nothing crashes.
func TestModelDatabaseGone(t *testing.T) {
	t.Parallel()
	h := setup(t)
	seedConflict(t, h.pool, "acme", "charge-42", transfer100, transfer1000)
	h.init()
	h.keys("enter")
	require.Contains(t, h.view(), "/amount")
	h.pool.Close()

	h.keys("x")
	h.typ("reason")
	h.keys("enter", "y")
	assert.Contains(t, h.view(), "error: reject #")
	h.keys("esc", "esc", "r")
	assert.Contains(t, h.view(), "error: load the queue")
	h.keys("4")
	assert.Contains(t, h.view(), "error:")
	h.keys("2", "e")
	h.typ("acme")
	h.keys("tab")
	h.typ("x")
	h.keys("tab")
	h.typ("demo.transfer")
	h.keys("tab", "tab")
	h.typ(transfer100)
	h.keys("ctrl+r")
	v := h.view()
	assert.Contains(t, v, "[xx] 1 Primary check")
	assert.Contains(t, v, "outcome error")
	h.keys("q")
	assert.True(t, h.quit)
}

func resolveInput(h *harness, tenant, op, payload string) {
	resolveInputClass(h, tenant, op, "demo.transfer", payload)
}

func resolveInputClass(h *harness, tenant, op, class, payload string) {
	h.keys("2", "e")
	h.typ(tenant)
	h.keys("tab")
	h.typ(op)
	h.keys("tab")
	h.typ(class)
	h.keys("tab", "tab")
	h.typ(payload)
	h.keys("esc")
}

func countRows(t *testing.T, pool *pgxpool.Pool, table string) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n))
	return n
}

func TestModelResolveStepByStep(t *testing.T) {
	t.Parallel()
	h := setup(t)
	seedConflict(t, h.pool, "acme", "charge-42", transfer100, transfer1000)
	h.init()
	inbox, quar := countRows(t, h.pool, "idem.inbox"), countRows(t, h.pool, "idem.quarantine")

	// Dry run (the default) of a conflicting payload: would_conflict, nothing written.
	resolveInput(h, "acme", "charge-42", `{"amount": 7, "currency":"EUR", "from":"acct-1","to":"acct-2"}`)
	h.keys("enter")
	v := h.view()
	assert.Contains(t, v, "DRY RUN")
	assert.Contains(t, v, "[ok] 1 Primary check")
	assert.Contains(t, v, "[ok] 2 Lookup")
	assert.Contains(t, v, "[!!] 3 Hash comparison")
	assert.Contains(t, v, "outcome would_conflict")
	assert.Equal(t, inbox, countRows(t, h.pool, "idem.inbox"))
	assert.Equal(t, quar, countRows(t, h.pool, "idem.quarantine"))

	// The same payload in another key order and spacing: the canonical hash
	// is equal, so it was already applied.
	h.keys("esc", "c")
	resolveInput(h, "acme", "charge-42", `{ "to":"acct-2", "currency":"EUR", "amount":100, "from":"acct-1" }`)
	h.keys("enter")
	assert.Contains(t, h.view(), "outcome already_applied")

	// A real run of an absent identity asks first, then applies it and shows
	// the saved response.
	h.keys("esc", "c")
	resolveInput(h, "acme", "charge-44", transfer100)
	h.keys("d", "enter")
	assert.Contains(t, h.view(), "Confirm a REAL run")
	assert.Equal(t, inbox, countRows(t, h.pool, "idem.inbox"), "nothing before the confirmation")
	h.keys("y")
	v = h.view()
	assert.Contains(t, v, "[ok] 4 Execute")
	assert.Contains(t, v, "outcome applied")
	assert.Contains(t, v, `"posting_id"`)
	assert.Equal(t, inbox+1, countRows(t, h.pool, "idem.inbox"))

	// A real run of a conflicting payload: quarantined; o opens the record.
	h.keys("esc", "c")
	resolveInput(h, "acme", "charge-42", `{"from":"acct-1","to":"acct-2","amount":5,"currency":"EUR"}`)
	h.keys("d", "enter", "y")
	v = h.view()
	assert.Contains(t, v, "outcome conflict")
	assert.Contains(t, v, "[!!] 5 Quarantine")
	require.NotNil(t, h.m.resolve.Form().Result)
	qid := h.m.resolve.Form().Result.QuarantineID
	assert.Greater(t, qid, int64(0))
	assert.Equal(t, quar+1, countRows(t, h.pool, "idem.quarantine"))
	h.keys("o")
	assert.Equal(t, TabQueue, h.m.Active())
	assert.Contains(t, h.view(), "#"+itoa(qid)+"  acme/charge-42")
	assert.Contains(t, h.view(), "incoming  5")

	// Runs are recorded like idemctl resolve's (the dry runs too): a start
	// before it reads, then the run, as many of each.
	acts := auditActions(t, h.pool)
	assert.Contains(t, acts, "alice resolve.run resolve:tui")
	assert.Contains(t, acts, "alice resolve.start resolve:tui")
	starts, runs := 0, 0
	for _, a := range acts {
		starts += strings.Count(a, " resolve.start ")
		runs += strings.Count(a, " resolve.run ")
	}
	assert.Equal(t, runs, starts, "every run writes both: %v", acts)
}

func TestModelResolveRefusesStandby(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.init()
	// A read-only session stands in for a standby: step 1 refuses.
	dbtest.Admin(t, h.dsn, "ALTER DATABASE "+currentDB(t, h.pool)+" SET default_transaction_read_only = on")
	h.pool.Reset()
	resolveInput(h, "acme", "charge-1", transfer100)
	h.keys("enter")
	v := h.view()
	assert.Contains(t, v, "[xx] 1 Primary check")
	assert.Contains(t, v, "refused")
	assert.Contains(t, v, "[--] 2 Lookup")
	assert.ErrorIs(t, func() error { _, err := recovery.CheckPrimary(context.Background(), h.pool); return err }(), recovery.ErrNotPrimary)
}

func currentDB(t *testing.T, pool *pgxpool.Pool) string {
	var name string
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT quote_ident(current_database())").Scan(&name))
	return name
}

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
func TestModelResolveRedrive(t *testing.T) {
	t.Parallel()
	h := setup(t)
	svc := &demo.Service{Pool: dbtest.PoolAs(t, h.dsn, dbtest.App, 4), Faults: demo.Faults{FailBeforeCommit: true}}
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	_, err := redrive.Set(context.Background(), h.pool, demo.AppClass,
		&redrive.Config{Kind: redrive.KindHTTP, URL: srv.URL + "/transfers"}, true, "alice")
	require.NoError(t, err)
	h.init()
	resolveInputClass(h, "acme", "app-1", demo.AppClass, transfer100)
	h.keys("enter")
	assert.Contains(t, h.view(), "outcome would_redrive")
	h.keys("esc", "c")
	resolveInputClass(h, "acme", "app-1", demo.AppClass, transfer100)
	h.keys("d", "enter", "y")
	v := h.view()
	assert.Contains(t, v, "re-driven through its service")
	assert.Contains(t, v, "500, 200")
	assert.Contains(t, v, "primary  applied")
	assert.Contains(t, v, "outcome applied")
	assert.Contains(t, v, `"charge_id"`)
}
