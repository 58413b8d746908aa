package tui

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/stretchr/testify/assert"

	"github.com/idemctl/idemctl/audit"
	"github.com/idemctl/idemctl/tui/styles"
)

// assertFits checks that no line of the screen passes w cells (FitLines
// would cut it: what is asserted whole must be whole within the width).
func assertFits(t *testing.T, v string, w int) {
	t.Helper()
	for i, l := range strings.Split(v, "\n") {
		assert.LessOrEqual(t, lipgloss.Width(l), w, "line %d: %q", i+1, l)
	}
}

// The header names the person the session maps to, with the login, at
// every width; the --operator label (only a label) only when there is room,
// and never in the person's place.
func TestHeaderShowsPersonWithLogin(t *testing.T) {
	t.Parallel()
	for _, w := range []int{80, 120} {
		h := fixtureHarness(t, goldenSetup{operator: "root"}, w, 24)
		first := strings.Split(h.view(), "\n")[0]
		assert.Contains(t, first, "as alice (op1)", "at %d columns", w)
		assert.Contains(t, first, fixedDB, "at %d columns", w)
		assertFits(t, first, w)
		if w == 80 {
			assert.NotContains(t, first, "root", "no room: the label goes, the person stays")
		} else {
			assert.Contains(t, first, "operator root")
		}
	}
	// The person unknown (a schema problem): the label, as before.
	st := styles.Ascii()
	m := New(Options{Services: Services{Audit: fixedAudit{}}, Operator: "root", Database: fixedDB,
		Now: func() time.Time { return fixedNow }, Styles: &st, Refresh: -1})
	h := &harness{t: t, m: m}
	h.send(tea.WindowSizeMsg{Width: 120, Height: 24})
	first := strings.Split(h.view(), "\n")[0]
	assert.Contains(t, first, "operator root")
	assert.NotContains(t, first, "as ")
}

// The audit chain's head hash is what `audit verify --anchor ID:HASH`
// takes: whole at 80 columns, on a line of its own, and the list below it
// still shows every row.
func TestAuditChainHeadHashWhole(t *testing.T) {
	t.Parallel()
	head := fmt.Sprintf("sha256:%064x", 30)
	for _, w := range []int{80, 120} {
		h := fixtureHarness(t, goldenSetup{}, w, 24)
		h.keys("4")
		v := h.view()
		assert.Contains(t, v, head, "at %d columns", w)
		assert.Contains(t, v, "head #30")
		assert.Contains(t, v, "#28", "the list keeps its rows")
		assertFits(t, v, w)
	}
}

// A reconcile run names its report's hash with its algorithm and its class
// whole at 80 columns, and every finding's identity.
func TestReconcileReportHashAndClassWhole(t *testing.T) {
	t.Parallel()
	for _, w := range []int{80, 120} {
		h := fixtureHarness(t, goldenSetup{}, w, 24)
		h.keys("5", "enter")
		v := h.view()
		assert.Contains(t, v, "sha256:3f7a9c0d5e1b2a4c6d8e0f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e", "at %d columns", w)
		assert.Contains(t, v, "class demo.transfer")
		for _, id := range []string{"acme/p-2", "acme/x-9", "globex/p-5"} {
			assert.Contains(t, v, id)
		}
		assert.NotContains(t, v, "3f7a9c0d5e1b…")
		assertFits(t, v, w)
	}
}

// The horizon's source names and plan scopes are whole at 80 columns: the
// columns that give way are named, and the footer names the selected plan's
// planner with the login; at 120 nothing is hidden and the plans table shows
// persons with their logins.
func TestHorizonSourceNamesAndScopesWhole(t *testing.T) {
	t.Parallel()
	for _, w := range []int{80, 120} {
		hz := newFixedHorizon()
		hz.plans[2].Scope = "initech/bets.settlement-revision"
		h := fixtureHarness(t, goldenSetup{horizon: hz}, w, 24)
		h.keys("3")
		v := h.view()
		for _, s := range []string{"kafka:payments.commands", "kafka:payments.dlq", "s3://replays",
			"acme/demo.transfer", "globex/*", "initech/bets.settlement-revision"} {
			assert.Contains(t, v, s, "at %d columns", w)
		}
		assertFits(t, v, w)
		if w == 80 {
			assert.Contains(t, v, "hidden: planned, approved")
			assert.Contains(t, v, "planned alice (op1)", "the footer names the planner with the login")
		} else {
			assert.NotContains(t, v, "hidden:")
			assert.Contains(t, v, "carol (carol)")
			assert.Contains(t, v, "bob (bob)")
		}
	}
}

// A source name too wide for the rest: KIND, then PROBED give way, named,
// and the name stays whole.
func TestHorizonLongSourceNameDropsColumns(t *testing.T) {
	t.Parallel()
	const longSource = "kafka:payments.commands.settlement-revisions.eu-west-1"
	hz := newFixedHorizon()
	hz.firstSource = longSource
	h := fixtureHarness(t, goldenSetup{horizon: hz}, 80, 24)
	h.keys("3")
	v := h.view()
	assert.Contains(t, v, longSource)
	assert.Contains(t, v, "hidden: kind")
	assert.NotContains(t, v, "KIND")
	assert.Contains(t, v, "RESULT")
	assertFits(t, v, 80)
}

// Every confirmation names the person the decision is recorded for, with
// the login, beside the --operator label (here another name: root).
func TestConfirmationsNamePersonWithLogin(t *testing.T) {
	t.Parallel()
	h := fixtureHarness(t, goldenSetup{operator: "root"}, 80, 24)
	h.keys("3", "a")
	v := h.view()
	assert.Contains(t, v, "Four eyes")
	assert.Contains(t, v, "decided by  alice (op1)")
	assert.Contains(t, v, "operator    root")

	h = fixtureHarness(t, goldenSetup{operator: "root"}, 80, 24)
	h.keys("2", "d", "e")
	h.typ("acme")
	h.keys("tab")
	h.typ("charge-42")
	h.keys("tab")
	h.typ("demo.transfer")
	h.keys("tab", "tab")
	h.typ(incomingPayload)
	h.keys("esc", "enter")
	v = h.view()
	assert.Contains(t, v, "Confirm a REAL run")
	assert.Contains(t, v, "run by        alice (op1)")

	h = fixtureHarness(t, goldenSetup{operator: "root"}, 80, 24)
	h.keys("5", "enter", "down", "p")
	v = h.view()
	assert.Contains(t, v, "Confirm: pin")
	assert.Contains(t, v, "by      alice (op1)")
	assert.Contains(t, v, "label   root")
}

type reportTarget struct{ fixedAudit }

const reportTargetText = "report:sha256:3f7a9c0d5e1b2a4c6d8e0f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e"

func (reportTarget) List(context.Context, audit.Filter) ([]audit.Record, error) {
	return []audit.Record{{ID: 7, At: fixedNow, Actor: "alice", Person: "alice", DBUser: "op1", Action: "reconcile.run",
		Target: reportTargetText, Details: json.RawMessage(`{}`)}}, nil
}

// An audit target wider than the list's row (a report's hash) is shown
// whole in the details pane, and the title says where.
func TestAuditTargetWholeInDetails(t *testing.T) {
	t.Parallel()
	st := styles.Ascii()
	m := New(Options{Services: Services{Audit: reportTarget{}}, Operator: "alice", Database: fixedDB,
		Now: func() time.Time { return fixedNow }, Styles: &st, Refresh: -1})
	h := &harness{t: t, m: m}
	h.send(tea.WindowSizeMsg{Width: 80, Height: 24})
	h.keys("4")
	v := h.view()
	assert.NotContains(t, v, reportTargetText, "the list cannot hold it at 80 columns")
	assert.Contains(t, v, "TARGET whole: enter")
	h.keys("enter")
	v = h.view()
	assert.Contains(t, v, "target\n  "+reportTargetText, "on a line of its own")
	assertFits(t, v, 80)
}

// A contract reference too long for the footer's line wraps whole; the plan
// list gives up the rows it takes and keeps the selected plan in view.
func TestHorizonFooterKeepsContractWhole(t *testing.T) {
	t.Parallel()
	const contract = "FIN-2026-114/payments-eu/settlement-revision-approval-board"
	hz := newFixedHorizon()
	hz.plans[0].Contract = contract
	h := fixtureHarness(t, goldenSetup{horizon: hz}, 80, 24)
	h.keys("3")
	v := h.view()
	assert.Contains(t, v, contract)
	assert.Contains(t, v, "> ")
	assert.Contains(t, v, "#3 acme/demo.transfer")
	assert.Contains(t, v, "planned alice (op1)")
	assertFits(t, v, 80)
}

// The groups view keeps a class (what class: searches) whole at 80 columns,
// even one that changed between the stored and the incoming record; CHANGED
// gives way, and FIRST and LAST go, named, when it must.
func TestQueueGroupsKeepClassWhole(t *testing.T) {
	t.Parallel()
	q := newFixedQuarantine()
	r := q.records[11]
	r.Class, r.IncomingClass = "payments.card_capture", "payments.card_capture_v2"
	q.records[11] = r
	h := fixtureHarness(t, goldenSetup{quarantine: q}, 80, 24)
	h.keys("v")
	v := h.view()
	assert.Contains(t, v, "payments.card_capture→payments.card_capture_v2")
	assert.Contains(t, v, "hidden: first, last")
	assertFits(t, v, 80)

	h = fixtureHarness(t, goldenSetup{}, 80, 24)
	h.keys("v")
	v = h.view()
	assert.NotContains(t, v, "hidden:", "room for every column")
	assert.Contains(t, v, "FIRST")
}
