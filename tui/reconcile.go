package tui

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
)

// Messages of the reconcile view.
type (
	reconcileMappingsMsg struct {
		seq      int
		mappings []reconcile.SavedMapping
		err      error
	}
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

type reconcileView struct {
	c   *Context
	svc ReconcileService

	mappings []reconcile.SavedMapping
	loaded   bool
	loading  bool
	seq      int
	nav      listNav

	mode    reconcileMode
	running string // the mapping being run
	run     *ReconcileRun
	fnav    listNav
	pinned  map[int]int64 // finding index -> correction id
	confirm bool          // asking whether to pin the selected finding
	pinning bool
	ban     banner
}

func newReconcileView(c *Context, svc ReconcileService) *reconcileView {
	return &reconcileView{c: c, svc: svc}
}

func (v *reconcileView) activate() tea.Cmd {
	if v.svc == nil {
		v.ban = warningBanner("the reconcile service is not available")
		return nil
	}
	if v.loaded {
		return nil
	}
	return v.load()
}

func (v *reconcileView) load() tea.Cmd {
	v.seq++
	v.loading = true
	seq, svc := v.seq, v.svc
	return func() tea.Msg {
		ctx, cancel := v.c.cmdContext()
		defer cancel()
		ms, err := svc.Mappings(ctx)
		return reconcileMappingsMsg{seq: seq, mappings: ms, err: err}
	}
}

// start runs the selected mapping; a run is bounded by the program's life,
// not by the per-command timeout (a report can hold millions of lines).
func (v *reconcileView) start() tea.Cmd {
	if v.nav.cursor >= len(v.mappings) || v.running != "" {
		return nil
	}
	sm := v.mappings[v.nav.cursor]
	if sm.Err != nil {
		v.ban = errorBanner(sm.Err)
		return nil
	}
	v.running, v.ban = sm.Mapping.Name, infoBanner("reconciling %s…", sm.Mapping.Name)
	svc, op, base := v.svc, v.c.Operator, v.c.Base
	return func() tea.Msg {
		run, err := svc.Run(base, sm.Mapping, op)
		return reconcileRunMsg{name: sm.Mapping.Name, run: run, err: err}
	}
}

func (v *reconcileView) pin() tea.Cmd {
	i := v.fnav.cursor
	v.pinning = true
	run, svc, op := v.run, v.svc, v.c.Operator
	return func() tea.Msg {
		ctx, cancel := v.c.cmdContext()
		defer cancel()
		id, err := svc.Pin(ctx, run, i, op)
		return reconcilePinnedMsg{index: i, id: id, err: err}
	}
}

func (v *reconcileView) typing() bool   { return false }
func (v *reconcileView) status() banner { return v.ban }

func (v *reconcileView) back() (bool, tea.Cmd) {
	switch {
	case v.confirm:
		v.confirm, v.ban = false, infoBanner("cancelled: nothing pinned")
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
func (v *reconcileView) selected() *reconcile.Finding {
	if v.run == nil || v.fnav.cursor >= len(v.run.Findings) {
		return nil
	}
	return &v.run.Findings[v.fnav.cursor]
}

func (v *reconcileView) update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case reconcileMappingsMsg:
		if msg.seq != v.seq {
			return nil
		}
		v.loading = false
		if msg.err != nil {
			v.ban = errorBanner(fmt.Errorf("read the saved mappings: %w", msg.err))
			return nil
		}
		v.mappings, v.loaded = msg.mappings, true
		v.nav.clamp(len(v.mappings), v.listHeight())
	case reconcileRunMsg:
		v.running = ""
		if msg.err != nil && msg.run.Summary.StartedAt.IsZero() {
			v.ban = errorBanner(fmt.Errorf("reconcile %s: %w", msg.name, msg.err))
			return nil
		}
		run := msg.run
		v.run, v.mode, v.fnav, v.pinned = &run, reconcileResults, listNav{}, map[int]int64{}
		v.ban = v.runBanner(msg.err)
	case reconcilePinnedMsg:
		v.pinning = false
		if msg.err != nil {
			v.ban = errorBanner(fmt.Errorf("pin: %w", msg.err))
			return nil
		}
		v.pinned[msg.index] = msg.id
		v.ban = successBanner("pinned as correction #%d: no purge removes this identity until it is done (idemctl corrections done %d)", msg.id, msg.id)
	case tea.KeyMsg:
		if v.svc != nil {
			return v.key(msg)
		}
	}
	return nil
}

// runBanner says how a run ended.
func (v *reconcileView) runBanner(err error) banner {
	s := v.run.Summary
	switch {
	case err != nil:
		return errorBanner(fmt.Errorf("reconcile %s: %w", v.run.Name, err))
	case s.Counts[reconcile.Invalid] > 0:
		return warningBanner("%d invalid line(s) in the report; recorded as audit row %d", s.Counts[reconcile.Invalid], s.AuditID)
	case s.Discrepancies() > 0:
		return warningBanner("%d discrepancies; recorded as audit row %d", s.Discrepancies(), s.AuditID)
	}
	return successBanner("everything matched; recorded as audit row %d", s.AuditID)
}

func (v *reconcileView) key(msg tea.KeyMsg) tea.Cmd {
	k := v.c.Keys.Reconcile
	if v.confirm {
		switch {
		case key.Matches(msg, v.c.Keys.Confirm.Yes):
			v.confirm = false
			return v.pin()
		case key.Matches(msg, v.c.Keys.Confirm.No):
			v.confirm, v.ban = false, infoBanner("cancelled: nothing pinned")
		}
		return nil
	}
	switch v.mode {
	case reconcileMappings:
		if v.nav.handle(k.List, msg, len(v.mappings), v.listHeight()) {
			return nil
		}
		switch {
		case key.Matches(msg, k.Run):
			return v.start()
		case key.Matches(msg, k.Refresh):
			return v.load()
		}
	case reconcileResults:
		if v.fnav.handle(k.List, msg, len(v.run.Findings), v.findingRows()) {
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
func (v *reconcileView) askPin(msg tea.KeyMsg) tea.Cmd {
	f := v.selected()
	if !key.Matches(msg, v.c.Keys.Reconcile.Pin) || f == nil || v.pinning {
		return nil
	}
	switch id, done := v.pinned[v.fnav.cursor]; {
	case done:
		v.ban = infoBanner("already pinned as correction #%d", id)
	case !f.Status.Discrepancy():
		v.ban = warningBanner("an invalid line names no discrepancy to pin: fix the report")
	default:
		v.confirm, v.ban = true, banner{}
	}
	return nil
}

func (v *reconcileView) keyMap() help.KeyMap {
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
func (v *reconcileView) listHeight() int { return max(1, v.c.bodyHeight()-5) }

// summaryRows is how many lines the run's summary takes.
func (v *reconcileView) summaryRows() []string {
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
			amounts = append(amounts, strings.TrimSpace(orDash(t.Inbox)+"/"+orDash(t.Report)+" "+cur))
		}
		rows = append(rows, "  "+pad(string(st), 18)+" "+padLeft(strconv.FormatInt(n, 10), 9)+"  "+strings.Join(amounts, ", "))
	}
	return rows
}

// findingRows is how many findings fit under the summary.
func (v *reconcileView) findingRows() int {
	return max(1, v.c.bodyHeight()-6-len(v.summaryRows()))
}

func (v *reconcileView) render(w, h int) string {
	st := v.c.Styles
	switch {
	case v.svc == nil:
		return fitLines([]string{st.Title.Render("Reconcile"), "", st.Warning.Render("  The reconcile service is not available.")}, w, h)
	case v.confirm:
		return v.renderConfirm(w, h)
	case v.mode == reconcileResults && v.run != nil:
		return v.renderResults(w, h)
	case v.mode == reconcileFinding && v.selected() != nil:
		return v.renderFinding(w, h)
	}
	return v.renderMappings(w, h)
}

func (v *reconcileView) renderMappings(w, h int) string {
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
	lines := []string{title, st.Column.Render("  " + pad("NAME", nameW) + " " + pad("CLASS", classW) + " " + pad("REPORT", reportW) + " " + pad("WINDOW", windowW))}
	switch {
	case !v.loaded && v.loading:
		lines = append(lines, "", st.Muted.Render("  Reading the saved mappings…"))
	case v.loaded && len(v.mappings) == 0:
		lines = append(lines, "", st.Muted.Render("  No saved mapping. Write one with:"),
			st.Muted.Render("  idemctl reconcile --class C --report FILE --key ... --save-mapping DIR/NAME.json"))
	}
	rows := v.listHeight()
	for i := v.nav.top; i < len(v.mappings) && i < v.nav.top+rows; i++ {
		m := v.mappings[i].Mapping
		marker := "  "
		if i == v.nav.cursor {
			marker = "> "
		}
		row := marker + pad(m.Name, nameW) + " " + pad(m.Class, classW) + " " + pad(m.Report, reportW) + " " + pad(windowText(m), windowW)
		switch {
		case i == v.nav.cursor:
			row = st.Selected.Render(row)
		case v.mappings[i].Err != nil:
			row = st.Error.Render("! " + pad(m.Name, nameW) + " " + term.Escape(oneLine(v.mappings[i].Err.Error())))
		}
		lines = append(lines, row)
	}
	lines = fitLinesSlice(lines, h-2)
	if v.nav.cursor < len(v.mappings) {
		m := v.mappings[v.nav.cursor].Mapping
		lines = append(lines, trunc(st.Label.Render("key ")+m.Key+orEmpty("  tenant ", m.Tenant), w),
			trunc(st.Label.Render("compare ")+orDash(m.Compare), w))
	}
	return fitLines(lines, w, h)
}

func windowText(m reconcile.Mapping) string {
	if m.Since == "" && m.Until == "" {
		return "all"
	}
	return orDash(m.Since) + " → " + orDash(m.Until)
}

func orEmpty(label, v string) string {
	if v == "" {
		return ""
	}
	return label + v
}
