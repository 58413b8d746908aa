// Package auditview is the console's audit log: the latest rows, newest
// first, with the verdict of the hash chain and a row's details.
package auditview

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/idemctl/idemctl/audit"
	"github.com/idemctl/idemctl/tui/keys"
	"github.com/idemctl/idemctl/tui/view"
)

// AuditLoadLimit is how many of the latest audit rows the view shows.
const AuditLoadLimit = 200

// Messages of the audit view.
type (
	auditVerifiedMsg struct {
		seq    int
		report audit.Report
		err    error
	}
)

// View is the audit log view; the root model owns it and routes messages to it.
type View struct {
	c   *view.Context
	svc AuditService

	rows      []audit.Record
	list      view.Loader[[]audit.Record]
	vseq      int
	verifying bool
	report    *audit.Report
	verifyErr error
	nav       view.ListNav
	details   bool
	// dtop is the first line of the details pane shown (it scrolls).
	dtop int
	ban  view.Banner
}

// New returns the audit log view over its service (nil: the view says it is not
// available); it does no I/O until activated.
func New(c *view.Context, svc AuditService) *View {
	return &View{c: c, svc: svc, list: view.NewLoader[[]audit.Record](c)}
}

// Activate implements view.View.
func (v *View) Activate() tea.Cmd {
	if v.svc == nil {
		v.ban = view.WarningBanner("the audit service is not available")
		return nil
	}
	return tea.Batch(v.load(), v.verify())
}

func (v *View) load() tea.Cmd {
	svc := v.svc
	return v.list.Load("load the audit log", func(ctx context.Context) ([]audit.Record, error) {
		return svc.List(ctx, audit.Filter{Limit: AuditLoadLimit})
	})
}

func (v *View) verify() tea.Cmd {
	v.vseq++
	v.verifying = true
	seq, svc := v.vseq, v.svc
	return func() tea.Msg {
		ctx, cancel := v.c.CmdContext()
		defer cancel()
		rep, err := svc.Verify(ctx)
		return auditVerifiedMsg{seq: seq, report: rep, err: err}
	}
}

// Typing implements view.View.
func (v *View) Typing() bool { return false }

// Status implements view.View.
func (v *View) Status() view.Banner { return v.ban }

// Back implements view.View.
func (v *View) Back() (bool, tea.Cmd) {
	if v.details {
		v.details = false
		return true, nil
	}
	return false, nil
}

// listHeight is the rows of the list: the body minus the title, the chain
// lines and the column line, and the details pane when open.
func (v *View) listHeight() int {
	h := v.c.BodyHeight() - 2 - len(v.chainLines(v.c.Width))
	if v.details {
		h -= v.detailsHeight()
	}
	return max(1, h)
}

func (v *View) detailsHeight() int { return max(4, (v.c.BodyHeight())/2-1) }

// Update implements view.View.
func (v *View) Update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case view.Loaded[[]audit.Record]:
		rows, ok := v.list.Arrived(msg, &v.ban)
		if !ok {
			return nil
		}
		v.rows = rows
		v.nav.Clamp(len(v.rows), v.listHeight())
	case auditVerifiedMsg:
		if msg.seq != v.vseq {
			return nil
		}
		v.verifying = false
		if msg.err != nil {
			v.report, v.verifyErr = nil, msg.err
			v.ban = view.ErrorBanner(fmt.Errorf("verify the audit chain: %w", msg.err))
			return nil
		}
		rep := msg.report
		v.report, v.verifyErr = &rep, nil
	case tea.KeyMsg:
		if v.svc == nil {
			return nil
		}
		k := v.c.Keys.Audit
		if v.nav.Handle(k.List, msg, len(v.rows), v.listHeight()) {
			v.dtop = 0 // another row: its details from the top
			return nil
		}
		switch {
		case key.Matches(msg, k.Details):
			v.details, v.dtop = !v.details, 0
			v.nav.Clamp(len(v.rows), v.listHeight())
		case key.Matches(msg, k.DetailsUp) && v.details:
			v.dtop = max(0, v.dtop-1)
		case key.Matches(msg, k.DetailsDown) && v.details:
			v.dtop++ // clamped when rendered, where the pane's lines are known
		case key.Matches(msg, k.Verify):
			return v.verify()
		case key.Matches(msg, k.Refresh):
			return tea.Batch(v.load(), v.verify())
		}
	}
	return nil
}

// KeyMap implements view.View.
func (v *View) KeyMap() help.KeyMap {
	k := v.c.Keys.Audit
	return keys.Bindings{
		Short: []key.Binding{k.Details, k.Verify, k.Refresh},
		Full: [][]key.Binding{{k.Up, k.Down, k.PageUp, k.PageDown, k.Top, k.Bottom},
			{k.Details, k.DetailsUp, k.DetailsDown, k.Verify, k.Refresh}},
	}
}

// chainLines is the chain's state in w cells. The head's hash is what
// `idemctl audit verify --anchor ID:HASH` needs, so it is never cut: when the
// line does not fit, the hash goes whole on a line of its own.
func (v *View) chainLines(w int) []string {
	st := v.c.Styles
	switch {
	case v.verifying && v.report == nil:
		return []string{st.Muted.Render("verifying the chain…")}
	case v.verifyErr != nil:
		return []string{st.Error.Render("chain: could not verify (" + view.OneLine(v.verifyErr.Error()) + ")")}
	case v.report == nil:
		return []string{""}
	case v.report.Intact:
		head := st.Success.Render("chain intact") + fmt.Sprintf(": %d rows, head #%d", v.report.Rows, v.report.LastID)
		if lipgloss.Width(head)+1+lipgloss.Width(v.report.LastHash) <= w {
			return []string{head + " " + v.report.LastHash}
		}
		return append([]string{head}, view.Indent("  ", view.Wrap(v.report.LastHash, max(10, w-2)))...)
	}
	// What moved names hashes too: wrapped, never cut.
	broken := st.Error.Render(fmt.Sprintf("CHAIN BROKEN at row %d", v.report.BrokenAt)) + ":"
	if lipgloss.Width(broken)+1+lipgloss.Width(v.report.Problem) <= w {
		return []string{broken + " " + v.report.Problem}
	}
	return append([]string{broken}, view.Indent("  ", view.Wrap(v.report.Problem, max(10, w-2)))...)
}

// Render implements view.View.
func (v *View) Render(w, h int) string {
	st := v.c.Styles
	title := st.Title.Render("Audit log")
	// What the list leaves out comes first in the title, before the prose.
	var notes []string
	title2 := st.Muted.Render("  read-only, newest first, hash-chained")
	if v.list.Loaded {
		title2 += "  " + st.Muted.Render(fmt.Sprintf("latest %d", len(v.rows)))
	}
	if v.list.Loading {
		title2 += "  " + st.Muted.Render("loading…")
	}
	atW := 20
	ids := make([]int64, len(v.rows))
	// TARGET (what an operator types next) and ACTION as wide as their
	// widest; ACTOR is the person and the login (four eyes compare
	// persons), or the person alone when the logins do not fit.
	targetW, actionW, actorFull, actorShort := len("TARGET"), len("ACTION"), len("ACTOR"), len("ACTOR")
	for i, r := range v.rows {
		ids[i] = r.ID
		targetW = max(targetW, lipgloss.Width(view.OrDash(r.Target)))
		actionW = max(actionW, lipgloss.Width(r.Action))
		actorFull = max(actorFull, lipgloss.Width(r.Who()))
		actorShort = max(actorShort, lipgloss.Width(auditShortWho(r)))
	}
	idW := view.IDWidth(ids...)
	room := w - 2 - idW - atW - 4 // for ACTOR, ACTION and TARGET
	// What gives way, in order: the logins (the persons stay), then the AT
	// column (named in the title; the details pane has the time), then the
	// actor itself; ACTION is never cut (reject and accept-as-new differ
	// only at the end), TARGET last.
	actorW, who := actorFull, audit.Record.Who
	if room-targetW-actionW < actorFull {
		actorW, who = actorShort, auditShortWho
	}
	if room-targetW-actionW < actorW {
		atW, room = 0, room+21
		notes = append(notes, "AT hidden")
		if room-targetW-actionW >= actorFull {
			actorW, who = actorFull, audit.Record.Who
		}
	}
	if avail := room - targetW - actionW; avail < actorW {
		actorW = max(5, avail)
	}
	widestTarget := targetW
	targetW = max(8, room-actorW-actionW)
	if targetW < widestTarget {
		// A target wider than the row (a report's hash): the details pane
		// shows it whole, and the title says so.
		notes = append(notes, "TARGET whole")
	}
	if len(notes) > 0 {
		title += "  " + st.Muted.Render("("+strings.Join(notes, ", ")+": enter)")
	}
	title += title2
	at := func(s string) string {
		if atW == 0 {
			return ""
		}
		return view.Pad(s, atW) + " "
	}
	chain := v.chainLines(w)
	lines := append(append([]string{title}, chain...),
		st.Column.Render("  "+view.PadLeft("ID", idW)+" "+at("AT")+view.Pad("ACTOR", actorW)+" "+view.Pad("ACTION", actionW)+" "+view.Pad("TARGET", targetW)))
	switch {
	case v.svc == nil:
		lines = append(lines, "", st.Warning.Render("  The audit service is not available."))
	case !v.list.Loaded && v.list.Loading:
		lines = append(lines, "", st.Muted.Render("  Loading the audit log…"))
	case v.list.Loaded && len(v.rows) == 0:
		lines = append(lines, "", st.Muted.Render("  The log is empty."))
	}
	rows := v.listHeight()
	lines = append(lines, v.nav.Rows(len(v.rows), rows, st.Selected, func(i int, marker string) string {
		r := v.rows[i]
		row := marker + view.PadLeft("#"+strconv.FormatInt(r.ID, 10), idW) + " " + at(view.Stamp(r.At)) + view.Pad(who(r), actorW) + " " +
			view.Pad(r.Action, actionW) + " " + view.Pad(view.OrDash(r.Target), targetW)
		return row
	})...)
	if v.details && v.nav.Cursor < len(v.rows) {
		lines = view.FitSlice(lines, 2+len(chain)+rows)
		lines = append(lines, v.detailLines(v.rows[v.nav.Cursor], w, v.detailsHeight())...)
	}
	return view.FitLines(lines, w, h)
}

// auditShortWho is a row's person alone, or its login when it has none.
func auditShortWho(r audit.Record) string {
	if r.Person != "" {
		return r.Person
	}
	return r.Who()
}

// detailLines is the details pane of row r: h lines of at most w cells,
// scrolled to v.dtop, with a position line when the row is longer.
func (v *View) detailLines(r audit.Record, w, h int) []string {
	st := v.c.Styles
	lines := []string{
		st.Title.Render(fmt.Sprintf("Row #%d", r.ID)) + st.Label.Render("  at ") + view.Stamp(r.At) + st.Label.Render("  by ") + r.Who() +
			st.Label.Render("  operator ") + r.Actor,
	}
	lines = append(lines, view.Labelled("target", st.Label, view.OrDash(r.Target), w, 2)...)
	lines = append(lines,
		st.Label.Render("hash ")+r.Hash,
		st.Label.Render("prev ")+r.PrevHash,
	)
	lines = append(lines, view.Wrap(st.Label.Render("details ")+view.OneLine(string(r.Details)), w)...)
	if len(lines) <= h {
		v.dtop = 0
		return lines
	}
	// Longer than the pane: a window on it, and where it is.
	body := max(1, h-1)
	v.dtop = max(0, min(v.dtop, len(lines)-body))
	end := v.dtop + body
	k := v.c.Keys.Audit
	pos := st.Muted.Render(fmt.Sprintf("lines %d-%d of %d  %s/%s scroll", v.dtop+1, end, len(lines),
		k.DetailsUp.Keys()[0], k.DetailsDown.Keys()[0]))
	return append(append([]string{}, lines[v.dtop:end]...), pos)
}
