package tui

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/audit"
	"github.com/idemctl/idemctl/internal/db"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/tui/queueview"
	"github.com/idemctl/idemctl/tui/styles"
)

// fixtureHarness drives a model over the fixed services (no database).
func fixtureHarness(t *testing.T, s goldenSetup, w, hgt int) *harness {
	t.Helper()
	h := &harness{t: t, m: goldenModel(s)}
	h.send(tea.WindowSizeMsg{Width: w, Height: hgt})
	h.init()
	return h
}

// lastLine is the footer.
func lastLine(v string) string {
	lines := strings.Split(v, "\n")
	return lines[len(lines)-1]
}

// At 80 columns the footer keeps ? help and q quit, whatever the view's keys.
func TestFooterKeepsHelpAndQuit(t *testing.T) {
	t.Parallel()
	h := fixtureHarness(t, goldenSetup{}, 80, 24)
	for _, keys := range [][]string{nil, {"enter"}, {"esc", "v"}, {"esc", "2"}, {"3"}, {"4"}, {"5"}} {
		h.keys(keys...)
		footer := lastLine(h.view())
		assert.Contains(t, footer, "? help", keys)
		assert.Contains(t, footer, "q quit", keys)
		assert.LessOrEqual(t, len([]rune(footer)), 80, keys)
	}
}

// An "ok:" banner fades after successTTL; an error stays.
func TestSuccessBannerFades(t *testing.T) {
	t.Parallel()
	h := fixtureHarness(t, goldenSetup{}, 100, 30)
	clock := fixedNow
	h.m.ctx.Now = func() time.Time { return clock }
	h.keys("enter", "x")
	h.typ("dup")
	h.keys("enter", "y")
	require.Contains(t, h.view(), "ok: rejected #12")
	clock = clock.Add(successTTL / 2)
	assert.Contains(t, h.view(), "ok: rejected #12")
	clock = clock.Add(successTTL)
	assert.NotContains(t, h.view(), "ok: rejected")
}

// The horizon view drops a load error once a load succeeds; a plan's BEFORE
// shows the time; the approve confirmation shows the contract and the proof;
// a plan being purged shows "purging".
func TestHorizonFixes(t *testing.T) {
	t.Parallel()
	hz := newFixedHorizon()
	hz.failLoad = errors.New("dial tcp 10.0.0.5:5432: connect: connection refused")
	h := fixtureHarness(t, goldenSetup{horizon: hz}, 100, 30)
	h.keys("3")
	require.Contains(t, h.view(), "connection refused")
	hz.mu.Lock()
	hz.failLoad = nil
	hz.mu.Unlock()
	h.keys("r")
	v := h.view()
	assert.NotContains(t, v, "connection refused", "a stale error after a successful refresh")
	assert.Contains(t, v, "2026-10-01 00:00Z")

	h.keys("a")
	v = h.view()
	assert.Contains(t, v, "FIN-2026-114")
	assert.Contains(t, v, "kafka:payments.commands: closed")
	assert.Contains(t, v, "dlq:payments: closed")

	h.keys("esc", "down")
	h.m.horizon.SetPurging(2, true)
	assert.Regexp(t, `#2 .*purging`, h.view())
	h.m.horizon.SetPurging(2, false)
}

type longActions struct{ fixedAudit }

func (longActions) List(context.Context, audit.Filter) ([]audit.Record, error) {
	return []audit.Record{{ID: 9, At: fixedNow, Actor: "bob", Action: "quarantine.bulk_accept_approve",
		Target: "quarantine_bulk_accept:3", Details: json.RawMessage(`{}`)}}, nil
}

// The audit ACTION column widens with the terminal and the actions.
func TestAuditActionColumnWidens(t *testing.T) {
	t.Parallel()
	st := styles.Ascii()
	m := New(Options{Services: Services{Audit: longActions{}}, Operator: "alice", Database: fixedDB,
		Now: func() time.Time { return fixedNow }, Styles: &st, Refresh: -1})
	h := &harness{t: t, m: m}
	h.send(tea.WindowSizeMsg{Width: 120, Height: 30})
	h.keys("4")
	assert.Contains(t, h.view(), "quarantine.bulk_accept_approve quarantine_bulk_accept:3")
	h.send(tea.WindowSizeMsg{Width: 80, Height: 24})
	v := h.view()
	// quarantine.reject and quarantine.accept_as_new differ at their end: an
	// action is never cut; the AT column gives way, and the title says so.
	assert.Contains(t, v, "quarantine.bulk_accept_approve quarantine_bulk_accept:3", "at 80 columns, whole")
	assert.Contains(t, v, "AT hidden")
}

// At 80 columns the queue never cuts an identity or a class: the columns no
// command needs give way, named in the title.
func TestQueueKeepsIdentityAndClassWhole(t *testing.T) {
	t.Parallel()
	q := newFixedQuarantine()
	r := q.records[11]
	r.OperationID, r.Class, r.IncomingClass = "b2-a-very-long-operation-id-from-the-walk-0001", "demo.transfer_app", "demo.transfer_app"
	q.records[11] = r
	h := fixtureHarness(t, goldenSetup{quarantine: q}, 80, 24)
	v := h.view()
	assert.Contains(t, v, "globex/b2-a-very-long-operation-id-from-the-walk-0001 demo.transfer_app", v)
	assert.Contains(t, v, "hidden: last seen, seen, status")
	for _, l := range strings.Split(v, "\n")[4:8] {
		assert.NotContains(t, l, "…", "a row is never cut: %s", l)
	}
}

// The confirmation of a decision shows the person the database records for
// this login (with the login), not only the --operator label.
func TestDecisionConfirmationShowsThePerson(t *testing.T) {
	t.Parallel()
	h := fixtureHarness(t, goldenSetup{operator: "mallory"}, 100, 30)
	h.keys("enter", "x")
	h.typ("tampered amount")
	h.keys("enter")
	v := h.view()
	assert.Contains(t, v, "decided by        alice (op1)", v)
	assert.Contains(t, v, "operator label    mallory")
}

// d on the result screen says what it changed.
func TestResolveDryRunToggleSaysSo(t *testing.T) {
	t.Parallel()
	h := fixtureHarness(t, goldenSetup{}, 100, 30)
	h.keys("2", "d")
	assert.Contains(t, h.view(), "dry run off")
	h.keys("d")
	assert.Contains(t, h.view(), "dry run on")
}

// While the database is unreachable a banner says so; it goes when the
// database is back.
func TestDisconnectedBanner(t *testing.T) {
	t.Parallel()
	dsn := dbtest.As(dbtest.NewDatabase(t), dbtest.Operator)
	proxy, via := dbtest.NewProxy(t, dsn)
	pool, err := db.Open(context.Background(), via, db.Options{MaxConns: 2})
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st := styles.Ascii()
	m := New(Options{Services: PoolServices(pool), Operator: "alice", Database: "proxy",
		Now: func() time.Time { return fixedNow }, Styles: &st, Refresh: -1, StepDelay: -1, Timeout: 5 * time.Second})
	h := &harness{t: t, m: m}
	h.send(tea.WindowSizeMsg{Width: 100, Height: 30})
	h.init()
	require.NotContains(t, h.view(), "disconnected")
	proxy.Cut()
	h.send(queueview.TickMsg{})
	assert.Contains(t, h.view(), "disconnected: the database is unreachable")
	proxy.Restore("")
	h.send(queueview.TickMsg{})
	assert.NotContains(t, h.view(), "disconnected")
}

// Enter with an empty reason says why nothing happens, in the decision form
// and in the bulk form.
func TestEmptyReasonSaysSo(t *testing.T) {
	t.Parallel()
	h := fixtureHarness(t, goldenSetup{}, 100, 30)
	h.keys("enter", "x", "enter")
	assert.Contains(t, h.view(), "a reason is required")
	h.keys("esc", "esc", " ", "x", "enter")
	assert.Contains(t, h.view(), "a reason is required")
	assert.Contains(t, h.view(), "Reject 1 selected record")
}

// The header never cuts the database's identity: at 80 columns the other
// parts give way, and the identity stays whole.
func TestHeaderKeepsDatabaseIdentityWhole(t *testing.T) {
	t.Parallel()
	long := "postgres@db-primary-eu-west-1.payments.internal.example.com:5432/payments"
	require.Less(t, len(long), 80)
	for _, w := range []int{80, 100, 200} {
		st := styles.Ascii()
		m := New(Options{Services: Services{Audit: fixedAudit{}}, Operator: "alice", Database: long,
			Now: func() time.Time { return fixedNow }, Styles: &st, Refresh: -1})
		h := &harness{t: t, m: m}
		h.send(tea.WindowSizeMsg{Width: w, Height: 24})
		first := strings.Split(h.view(), "\n")[0]
		assert.Contains(t, first, long, "at %d columns", w)
		assert.LessOrEqual(t, lipgloss.Width(first), w)
		if w == 200 {
			assert.Contains(t, first, "operator alice", "room for everything: nothing is shortened")
		}
	}
}

// The audit list names who acted as the person with the login; the details
// pane of a long row scrolls with its keys.
func TestAuditWhoAndDetailsScroll(t *testing.T) {
	t.Parallel()
	h := fixtureHarness(t, goldenSetup{}, 80, 24)
	h.keys("4")
	v := h.view()
	assert.Contains(t, v, "bob (bob)")
	assert.Contains(t, v, "alice (op1)")
	assert.Contains(t, v, "(no person) payments", "a login with no person says so")
	h.keys("down", "enter")
	v = h.view()
	assert.Contains(t, v, "Row #29  at 2026-11-30 11:40:00Z  by alice (op1)  operator root")
	assert.Contains(t, v, "lines 1-7 of 21")
	assert.NotContains(t, v, "charge-last-of-the-run")
	for range 20 {
		h.send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{'J'}})
	}
	v = h.view()
	assert.Contains(t, v, "lines 15-21 of 21", "scrolled to the end, and no further")
	assert.Contains(t, v, "charge-last-of-the-run")
	assert.NotContains(t, v, "Row #29")
	h.send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{'K'}})
	assert.Contains(t, h.view(), "lines 14-20 of 21")
	h.keys("up")
	assert.Contains(t, h.view(), "Row #30", "another row's details start at the top")
}
