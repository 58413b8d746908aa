// Package reconcileview is the console's reconcile view: the saved
// mappings, a run's counts and discrepancies (render.go), and pinning a
// discrepancy as a pending manual correction.
package reconcileview

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/idemctl/idemctl/internal/term"
	"github.com/idemctl/idemctl/reconcile"
	"github.com/idemctl/idemctl/tui/keys"
	"github.com/idemctl/idemctl/tui/view"
)

// Messages of the reconcile view.
type (
	reconcileRunMsg struct {
		name string
		run  ReconcileRun
		err  error
	}
	reconcilePinnedMsg struct {
		index int
		id    int64
		err   error
	}
)

// reconcileMode is what the view shows.
type reconcileMode int

const (
	reconcileMappings reconcileMode = iota // the saved mappings
	reconcileResults                       // a run's counts and discrepancies
	reconcileFinding                       // one finding
)

// View is the reconcile view; the root model owns it and routes messages to it.
type View struct {
	c   *view.Context
	svc ReconcileService

	mappings []reconcile.SavedMapping
	list     view.Loader[[]reconcile.SavedMapping]
	nav      view.ListNav

	mode    reconcileMode
	running string // the mapping being run
	run     *ReconcileRun
	fnav    view.ListNav
	pinned  map[int]int64 // finding index -> correction id
	confirm bool          // asking whether to pin the selected finding
	pinning bool
	ban     view.Banner
}

// New returns the reconcile view over its service (nil: the view says it is not
// available); it does no I/O until activated.
func New(c *view.Context, svc ReconcileService) *View {
	return &View{c: c, svc: svc, list: view.NewLoader[[]reconcile.SavedMapping](c)}
}

// Activate implements view.View.
func (v *View) Activate() tea.Cmd {
	if v.svc == nil {
		v.ban = view.WarningBanner("the reconcile service is not available")
		return nil
	}
	if v.list.Loaded {
		return nil
	}
	return v.load()
}

func (v *View) load() tea.Cmd {
	return v.list.Load("read the saved mappings", v.svc.Mappings)
}

// start runs the selected mapping; a run is bounded by the program's life,
// not by the per-command timeout (a report can hold millions of lines).
func (v *View) start() tea.Cmd {
	if v.nav.Cursor >= len(v.mappings) || v.running != "" {
		return nil
	}
	sm := v.mappings[v.nav.Cursor]
	if sm.Err != nil {
		v.ban = view.ErrorBanner(sm.Err)
		return nil
	}
	v.running, v.ban = sm.Mapping.Name, view.InfoBanner("reconciling %s…", sm.Mapping.Name)
	svc, op, base := v.svc, v.c.Operator, v.c.Base
	return func() tea.Msg {
		run, err := svc.Run(base, sm.Mapping, op)
		return reconcileRunMsg{name: sm.Mapping.Name, run: run, err: err}
	}
}

func (v *View) pin() tea.Cmd {
	i := v.fnav.Cursor
	v.pinning = true
	run, svc, op := v.run, v.svc, v.c.Operator
	return func() tea.Msg {
		ctx, cancel := v.c.CmdContext()
		defer cancel()
		id, err := svc.Pin(ctx, run, i, op)
		return reconcilePinnedMsg{index: i, id: id, err: err}
	}
}

// Typing implements view.View.
func (v *View) Typing() bool { return false }

// Status implements view.View.
func (v *View) Status() view.Banner { return v.ban }

// Back implements view.View.
func (v *View) Back() (bool, tea.Cmd) {
	switch {
	case v.confirm:
		v.confirm, v.ban = false, view.InfoBanner("cancelled: nothing pinned")
	case v.mode == reconcileFinding:
		v.mode = reconcileResults
	case v.mode == reconcileResults:
		v.mode = reconcileMappings
	default:
		return false, nil
	}
	return true, nil
}

// selected is the finding under the cursor.
func (v *View) selected() *reconcile.Finding {
	if v.run == nil || v.fnav.Cursor >= len(v.run.Findings) {
		return nil
	}
	return &v.run.Findings[v.fnav.Cursor]
}

// Update implements view.View.
func (v *View) Update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case view.Loaded[[]reconcile.SavedMapping]:
		ms, ok := v.list.Arrived(msg, &v.ban)
		if !ok {
			return nil
		}
		v.mappings = ms
		v.nav.Clamp(len(v.mappings), v.listHeight())
	case reconcileRunMsg:
		v.running = ""
		if msg.err != nil && msg.run.Summary.StartedAt.IsZero() {
			v.ban = view.ErrorBanner(fmt.Errorf("reconcile %s: %w", msg.name, msg.err))
			return nil
		}
		run := msg.run
		v.run, v.mode, v.fnav, v.pinned = &run, reconcileResults, view.ListNav{}, map[int]int64{}
		v.ban = v.runBanner(msg.err)
	case reconcilePinnedMsg:
		v.pinning = false
		if msg.err != nil {
			v.ban = view.ErrorBanner(fmt.Errorf("pin: %w", msg.err))
			return nil
		}
		v.pinned[msg.index] = msg.id
		v.ban = view.SuccessBanner("pinned as correction #%d: no purge removes this identity until it is done (idemctl corrections done %d)", msg.id, msg.id)
	case tea.KeyMsg:
		if v.svc != nil {
			return v.key(msg)
		}
	}
	return nil
}

// runBanner says how a run ended.
func (v *View) runBanner(err error) view.Banner {
	s := v.run.Summary
	switch {
	case err != nil:
		return view.ErrorBanner(fmt.Errorf("reconcile %s: %w", v.run.Name, err))
	case s.Counts[reconcile.Invalid] > 0:
		return view.WarningBanner("%d invalid line(s) in the report; recorded as audit row %d", s.Counts[reconcile.Invalid], s.AuditID)
	case s.Discrepancies() > 0:
		return view.WarningBanner("%d discrepancies; recorded as audit row %d", s.Discrepancies(), s.AuditID)
	}
	return view.SuccessBanner("everything matched; recorded as audit row %d", s.AuditID)
}

func (v *View) key(msg tea.KeyMsg) tea.Cmd {
	k := v.c.Keys.Reconcile
	if v.confirm {
		return v.c.Answer(msg, &v.confirm, &v.ban, "cancelled: nothing pinned", v.pin)
	}
	switch v.mode {
	case reconcileMappings:
		if v.nav.Handle(k.List, msg, len(v.mappings), v.listHeight()) {
			return nil
		}
		switch {
		case key.Matches(msg, k.Run):
			return v.start()
		case key.Matches(msg, k.Refresh):
			return v.load()
		}
	case reconcileResults:
		if v.fnav.Handle(k.List, msg, len(v.run.Findings), v.findingRows()) {
			return nil
		}
		if key.Matches(msg, k.Open) && v.selected() != nil {
			v.mode = reconcileFinding
			return nil
		}
		return v.askPin(msg)
	case reconcileFinding:
		return v.askPin(msg)
	}
	return nil
}

// askPin handles p on a finding: a discrepancy not pinned yet asks first.
func (v *View) askPin(msg tea.KeyMsg) tea.Cmd {
	f := v.selected()
	if !key.Matches(msg, v.c.Keys.Reconcile.Pin) || f == nil || v.pinning {
		return nil
	}
	switch id, done := v.pinned[v.fnav.Cursor]; {
	case done:
		v.ban = view.InfoBanner("already pinned as correction #%d", id)
	case !f.Status.Discrepancy():
		v.ban = view.WarningBanner("an invalid line names no discrepancy to pin: fix the report")
	default:
		v.confirm, v.ban = true, view.Banner{}
	}
	return nil
}

// KeyMap implements view.View.
func (v *View) KeyMap() help.KeyMap {
	k := v.c.Keys.Reconcile
	nav := []key.Binding{k.Up, k.Down, k.PageUp, k.PageDown, k.Top, k.Bottom}
	switch {
	case v.svc == nil:
		return keys.Bindings{}
	case v.confirm:
		return keys.Bindings{Short: []key.Binding{v.c.Keys.Confirm.Yes, v.c.Keys.Confirm.No}}
	case v.mode == reconcileMappings:
		return keys.Bindings{Short: []key.Binding{k.Run, k.Refresh, k.Down}, Full: [][]key.Binding{nav, {k.Run, k.Refresh}}}
	case v.mode == reconcileResults:
		return keys.Bindings{Short: []key.Binding{k.Open, k.Pin, k.Down}, Full: [][]key.Binding{nav, {k.Open, k.Pin}}}
	}
	return keys.Bindings{Short: []key.Binding{k.Pin}}
}

// listHeight is the mapping rows: the body minus the title, the column line
// and the two footer lines.
func (v *View) listHeight() int { return max(1, v.c.BodyHeight()-5) }

// summaryRows is how many lines the run's summary takes.
func (v *View) summaryRows() []string {
	if v.run == nil {
		return nil
	}
	var rows []string
	s := v.run.Summary
	for _, st := range reconcile.Statuses {
		n := s.Counts[st]
		if n == 0 && st != reconcile.Matched {
			continue
		}
		amounts := []string{}
		for _, cur := range s.Currencies(st) {
			t := s.Amounts[st][cur]
			amounts = append(amounts, strings.TrimSpace(view.OrDash(t.Inbox)+"/"+view.OrDash(t.Report)+" "+cur))
		}
		rows = append(rows, "  "+view.Pad(string(st), 18)+" "+view.PadLeft(strconv.FormatInt(n, 10), 9)+"  "+strings.Join(amounts, ", "))
	}
	return rows
}

// findingRows is how many findings fit under the summary.
func (v *View) findingRows() int {
	return max(1, v.c.BodyHeight()-5-len(v.headLines(v.c.Width))-len(v.summaryRows()))
}

// Render implements view.View.
func (v *View) Render(w, h int) string {
	st := v.c.Styles
	switch {
	case v.svc == nil:
		return view.FitLines([]string{st.Title.Render("Reconcile"), "", st.Warning.Render("  The reconcile service is not available.")}, w, h)
	case v.confirm:
		return v.renderConfirm(w, h)
	case v.mode == reconcileResults && v.run != nil:
		return v.renderResults(w, h)
	case v.mode == reconcileFinding && v.selected() != nil:
		return v.renderFinding(w, h)
	}
	return v.renderMappings(w, h)
}

func (v *View) renderMappings(w, h int) string {
	st := v.c.Styles
	title := st.Title.Render("Reconcile") + st.Muted.Render(fmt.Sprintf("  saved mappings · %d", len(v.mappings)))
	if v.running != "" {
		title += st.StepRunning.Render("  running " + v.running + "…")
	}
	const classW, windowW = 16, 20
	nameW := 8
	for _, m := range v.mappings {
		nameW = max(nameW, min(24, len(m.Mapping.Name)))
	}
	reportW := max(8, w-2-nameW-classW-windowW-3)
	lines := []string{title, st.Column.Render("  " + view.Pad("NAME", nameW) + " " + view.Pad("CLASS", classW) + " " + view.Pad("REPORT", reportW) + " " + view.Pad("WINDOW", windowW))}
	switch {
	case !v.list.Loaded && v.list.Loading:
		lines = append(lines, "", st.Muted.Render("  Reading the saved mappings…"))
	case v.list.Loaded && len(v.mappings) == 0:
		lines = append(lines, "", st.Muted.Render("  No saved mapping. Write one with:"),
			st.Muted.Render("  idemctl reconcile --class C --report FILE --key ... --save-mapping DIR/NAME.json"))
	}
	rows := v.listHeight()
	lines = append(lines, v.nav.Rows(len(v.mappings), rows, st.Selected, func(i int, marker string) string {
		m := v.mappings[i].Mapping
		if err := v.mappings[i].Err; err != nil && i != v.nav.Cursor {
			return st.Error.Render("! " + view.Pad(m.Name, nameW) + " " + term.Escape(view.OneLine(err.Error())))
		}
		return marker + view.Pad(m.Name, nameW) + " " + view.Pad(m.Class, classW) + " " + view.Pad(m.Report, reportW) + " " + view.Pad(windowText(m), windowW)
	})...)
	lines = view.FitSlice(lines, h-2)
	if v.nav.Cursor < len(v.mappings) {
		m := v.mappings[v.nav.Cursor].Mapping
		lines = append(lines, view.Trunc(st.Label.Render("key ")+m.Key+orEmpty("  tenant ", m.Tenant), w),
			view.Trunc(st.Label.Render("compare ")+view.OrDash(m.Compare), w))
	}
	return view.FitLines(lines, w, h)
}

func windowText(m reconcile.Mapping) string {
	if m.Since == "" && m.Until == "" {
		return "all"
	}
	return view.OrDash(m.Since) + " → " + view.OrDash(m.Until)
}

func orEmpty(label, v string) string {
	if v == "" {
		return ""
	}
	return label + v
}
