package tui

import (
	"context"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/audit"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/quarantine"
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
