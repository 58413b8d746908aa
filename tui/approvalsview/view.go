// Package approvalsview is the console's approvals: the four-eyes plans
// (accept-as-new, record, import) with what each will run, and the second
// person's approval.
package approvalsview

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/idemctl/idemctl/tui/keys"
	"github.com/idemctl/idemctl/tui/view"
)

// ApprovalService is what the approvals view needs: the four-eyes plans that
// let something run or enter (accept-as-new plans, record and import plans),
// each with what it will run, and the approval. An adapter over packages
// quarantine and governance implements it (ApprovalsDB).
type ApprovalService interface {
	// Plans lists the plans, newest first, each with its review.
	Plans(ctx context.Context) ([]ApprovalPlan, error)
	// Approve is the second person's approval of plan id of kind. It
	// returns an error wrapping ErrSamePerson when the operator's person
	// planned it.
	Approve(ctx context.Context, kind PlanKind, id int64, operator string) error
}

// ErrSamePerson is the four-eyes refusal of an approval: the person who
// planned a plan cannot approve it, whatever the login.
var ErrSamePerson = errors.New("four eyes: another person must approve")

// PlanKind says what a plan lets happen.
type PlanKind string

// Plan kinds of the approvals view.
const (
	// KindAccept: accept-as-new (bulk, or the single one of a money class):
	// the incoming payloads run as new operations.
	KindAccept PlanKind = "accept-as-new"
	// KindRecord: outcomes known from outside enter without their effect.
	KindRecord PlanKind = "record"
	// KindImport: an existing store's identities enter without their effect.
	KindImport PlanKind = "import"
)

// ApprovalPlan is one plan as its approver sees it.
type ApprovalPlan struct {
	Kind  PlanKind
	ID    int64
	State string
	// Planned and Approved are the persons (with the login or label).
	Planned, Approved string
	Reason            string
	// What says in a few words what it does ("rule {operation_id}-rev2",
	// "from charges.ndjson").
	What string
	// Totals are the money totals per currency of what it runs or records
	// ("EUR 1,234.50 over 12 records"); Problems the items of a money class
	// left out of them, named.
	Totals   []string
	Problems []string
	Items    []ApprovalItem
}

// ApprovalItem is one record or identity of a plan.
type ApprovalItem struct {
	// Ref is the record id ("#12") or the item number ("item 3").
	Ref string
	// Identity is tenant/operation; Target what it runs as or its class.
	Identity, Target string
	// Lines say what runs: each changed field ("/amount: 500 -> 650"), that
	// the stored body was purged, or the evidence and the amount.
	Lines []string
}

// planRef identifies a plan in the list: ids are per kind.
type planRef struct {
	kind PlanKind
	id   int64
}

func planKey(p ApprovalPlan) planRef { return planRef{p.Kind, p.ID} }

// planned reports whether the plan waits for its approval.
func (p ApprovalPlan) planned() bool { return p.State == "planned" }

// Messages of the approvals view.
type (
	planApprovedMsg struct {
		kind PlanKind
		id   int64
		err  error
	}
)

// View is the approvals view; the root model owns it and routes messages to it.
type View struct {
	c   *view.Context
	svc ApprovalService

	plans []ApprovalPlan
	list  view.Loader[[]ApprovalPlan]
	nav   view.ListNav
	ban   view.Banner

	// open shows the selected plan whole; scroll is its first line.
	open    bool
	scroll  int
	confirm bool
	busy    bool
}

// New returns the approvals view over its service (nil: the view says it is not
// available); it does no I/O until activated.
func New(c *view.Context, svc ApprovalService) *View {
	return &View{c: c, svc: svc, list: view.NewLoader[[]ApprovalPlan](c)}
}

// Activate implements view.View.
func (v *View) Activate() tea.Cmd {
	if v.svc == nil {
		v.ban = view.WarningBanner("the approvals service is not wired into this build")
		return nil
	}
	return v.load()
}

func (v *View) load() tea.Cmd {
	if v.svc == nil {
		return nil
	}
	return v.list.Load("load the plans", v.svc.Plans)
}

// Typing implements view.View.
func (v *View) Typing() bool { return false }

// Status implements view.View.
func (v *View) Status() view.Banner { return v.ban }

// Back implements view.View.
func (v *View) Back() (bool, tea.Cmd) {
	switch {
	case v.confirm:
		v.confirm = false
		v.ban = view.InfoBanner("cancelled: nothing changed")
		return true, nil
	case v.open:
		v.open, v.scroll = false, 0
		return true, nil
	}
	return false, nil
}

func (v *View) listRows() int { return max(1, v.c.BodyHeight()-4) }

func (v *View) selected() *ApprovalPlan { return view.At(v.plans, v.nav.Cursor) }

// Update implements view.View.
func (v *View) Update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case view.Loaded[[]ApprovalPlan]:
		plans, ok := v.list.Arrived(msg, &v.ban)
		if !ok {
			return nil
		}
		old := v.plans
		v.plans = plans
		view.Reselect(&v.nav, old, v.plans, planKey, v.listRows())
	case planApprovedMsg:
		v.busy = false
		switch {
		case errors.Is(msg.err, ErrSamePerson):
			v.ban = view.Banner{Kind: view.BannerError, Text: fmt.Sprintf("refused: you planned %s plan #%d; another person must approve it", msg.kind, msg.id)}
		case msg.err != nil:
			v.ban = view.ErrorBanner(fmt.Errorf("approve %s plan #%d: %w", msg.kind, msg.id, msg.err))
		default:
			v.ban = view.SuccessBanner("%s plan #%d approved by %s; it can now run", msg.kind, msg.id, v.c.Decider())
		}
		return v.load()
	case tea.KeyMsg:
		return v.key(msg)
	}
	return nil
}

func (v *View) key(msg tea.KeyMsg) tea.Cmd {
	if v.svc == nil {
		return nil
	}
	k := v.c.Keys.Approvals
	if v.confirm {
		return v.c.Answer(msg, &v.confirm, &v.ban, "cancelled: nothing changed", v.approve)
	}
	if v.open {
		switch {
		case key.Matches(msg, k.Down), key.Matches(msg, k.PageDown):
			v.scroll++
			if key.Matches(msg, k.PageDown) {
				v.scroll += v.c.BodyHeight() - 2
			}
			return nil
		case key.Matches(msg, k.Up), key.Matches(msg, k.PageUp):
			v.scroll--
			if key.Matches(msg, k.PageUp) {
				v.scroll -= v.c.BodyHeight() - 2
			}
			v.scroll = max(0, v.scroll)
			return nil
		case key.Matches(msg, k.Top):
			v.scroll = 0
			return nil
		}
	} else if v.nav.Handle(k.List, msg, len(v.plans), v.listRows()) {
		return nil
	}
	p := v.selected()
	switch {
	case key.Matches(msg, k.Refresh):
		return v.load()
	case key.Matches(msg, k.Open):
		if p != nil {
			v.open, v.scroll = true, 0
		}
	case key.Matches(msg, k.Approve):
		switch {
		case p == nil || v.busy:
		case p.Kind == KindImport:
			// Not offered (KeyMap): the approval reads the source again.
			v.ban = view.InfoBanner("%s", importApproveHint(p.ID))
		case !p.planned():
			v.ban = view.WarningBanner("%s plan #%d is %s: only a planned plan can be approved", p.Kind, p.ID, p.State)
		default:
			v.confirm, v.scroll, v.ban = true, 0, view.Banner{}
		}
	}
	return nil
}

func (v *View) approve() tea.Cmd {
	p := v.selected()
	if p == nil {
		return nil
	}
	v.busy = true
	kind, id, svc, op := p.Kind, p.ID, v.svc, v.c.Operator
	return func() tea.Msg {
		ctx, cancel := v.c.CmdContext()
		defer cancel()
		return planApprovedMsg{kind: kind, id: id, err: svc.Approve(ctx, kind, id, op)}
	}
}

// KeyMap implements view.View.
func (v *View) KeyMap() help.KeyMap {
	k := v.c.Keys.Approvals
	switch {
	case v.svc == nil:
		return keys.Bindings{}
	case v.confirm:
		return keys.Bindings{Short: []key.Binding{v.c.Keys.Confirm.Yes, v.c.Keys.Confirm.No}}
	}
	// An import plan is not approved here (importApproveHint): no "a approve".
	approve := []key.Binding{k.Approve}
	if p := v.selected(); p != nil && p.Kind == KindImport {
		approve = nil
	}
	if v.open {
		return keys.Bindings{Short: append(approve, k.Down, k.Up, v.c.Keys.Global.Back)}
	}
	return keys.Bindings{
		Short: append(append([]key.Binding{k.Open}, approve...), k.Refresh, k.Down),
		Full:  [][]key.Binding{{k.Up, k.Down, k.PageUp, k.PageDown, k.Top, k.Bottom}, append(append([]key.Binding{k.Open}, approve...), k.Refresh)},
	}
}

// importApproveHint says how an import plan is approved: by idemctl import
// approve, which reads the plan's source again (the console holds no
// source), so the approver's check is against the store as it is.
func importApproveHint(id int64) string {
	return fmt.Sprintf("import plan #%d is approved with idemctl import approve %d and its source (--from-ndjson FILE, or --from-postgres DSN --query SQL): the approval reads the source again, which the console does not", id, id)
}

// Render implements view.View.
func (v *View) Render(w, h int) string {
	st := v.c.Styles
	if v.svc == nil {
		return view.FitLines([]string{st.Title.Render("Approvals"), "",
			st.Warning.Render("  The approvals service is not available in this build.")}, w, h)
	}
	if p := v.selected(); p != nil && (v.open || v.confirm) {
		return v.renderPlan(*p, w, h)
	}
	waiting := 0
	for _, p := range v.plans {
		if p.planned() {
			waiting++
		}
	}
	title := st.Title.Render("Approvals") + st.Muted.Render(fmt.Sprintf("  %d plans · %d waiting for a second person", len(v.plans), waiting))
	if v.list.Loading {
		title += st.Muted.Render("  loading…")
	}
	ids := make([]int64, len(v.plans))
	for i, p := range v.plans {
		ids[i] = p.ID
	}
	// PLANNED and APPROVED are persons with their logins (four eyes compare
	// persons), whole; WILL APPLY (whole when the plan opens) gives way.
	const kindW, stateW = 13, 9
	plW, apW := len("PLANNED"), len("APPROVED")
	for _, p := range v.plans {
		plW = max(plW, lipgloss.Width(view.OrDash(p.Planned)))
		apW = max(apW, lipgloss.Width(view.OrDash(p.Approved)))
	}
	idW := view.IDWidth(ids...)
	totW := w - 2 - kindW - idW - stateW - plW - apW - 5
	if totW < 10 {
		totW = 0
		title += "  " + st.Warning.Render("hidden: will apply (enter)")
	}
	lines := []string{title, "", st.Column.Render("  " + view.Pad("KIND", kindW) + " " + view.PadLeft("ID", idW) + " " + view.Pad("STATE", stateW) + " " +
		view.Pad("PLANNED", plW) + " " + view.Pad("APPROVED", apW) + totCell("WILL APPLY", totW))}
	if v.list.Loaded && len(v.plans) == 0 {
		lines = append(lines, st.Muted.Render("  no plan (idemctl quarantine accept-as-new --rule ..., idemctl record plan make them)"))
	}
	rows := v.listRows()
	lines = append(lines, v.nav.Rows(len(v.plans), rows, st.Selected, func(i int, marker string) string {
		p := v.plans[i]
		row := marker + view.Pad(string(p.Kind), kindW) + " " + view.PadLeft("#"+strconv.FormatInt(p.ID, 10), idW) + " " + view.Pad(p.State, stateW) + " " +
			view.Pad(view.OrDash(p.Planned), plW) + " " + view.Pad(view.OrDash(p.Approved), apW) + totCell(willApplyLine(p), totW)
		return row
	})...)
	return view.FitLines(lines, w, h)
}

// totCell is the WILL APPLY cell with its separator, or nothing when the
// column is hidden (w 0).
func totCell(s string, w int) string {
	if w == 0 {
		return ""
	}
	return " " + view.Pad(s, w)
}

// willApplyLine is a plan's totals on one line.
func willApplyLine(p ApprovalPlan) string {
	s := strings.Join(p.Totals, "; ")
	if len(p.Problems) > 0 {
		s = strings.TrimPrefix(s+fmt.Sprintf("; %d not in the totals", len(p.Problems)), "; ")
	}
	if s == "" {
		return "no money class"
	}
	return s
}

// renderPlan draws one plan whole: who, why, the money totals, and each
// record with what it runs; in the confirmation the question comes first
// and the keys last.
func (v *View) renderPlan(p ApprovalPlan, w, h int) string {
	st := v.c.Styles
	var head, lines []string
	row := func(k, val string) { lines = append(lines, st.Label.Render(view.Pad(k, 12))+val) }
	if v.confirm {
		head = append(head, st.Warning.Render(fmt.Sprintf("Confirm: approve %s plan #%d", p.Kind, p.ID)))
	} else {
		head = append(head, st.Title.Render(fmt.Sprintf("%s plan #%d", p.Kind, p.ID))+st.Muted.Render("  "+p.State))
	}
	row("what", p.What)
	row("planned by", view.OrDash(p.Planned))
	row("approved by", view.OrDash(p.Approved))
	row("reason", p.Reason)
	if p.Kind == KindImport && p.planned() {
		row("approve", importApproveHint(p.ID))
	}
	if len(p.Totals) == 0 && len(p.Problems) == 0 {
		row("will apply", "no money class")
	}
	for i, t := range p.Totals {
		k := ""
		if i == 0 {
			k = "will apply"
		}
		row(k, st.Warning.Render(t))
	}
	for _, pr := range p.Problems {
		row("not counted", st.Error.Render(pr))
	}
	lines = append(lines, "", st.Label.Render(fmt.Sprintf("%s (%d)", itemsTitle(p.Kind), len(p.Items))))
	for _, it := range p.Items {
		lines = append(lines, st.DiffPath.Render(it.Ref)+" "+it.Identity+st.Muted.Render(" -> ")+it.Target)
		for _, l := range it.Lines {
			lines = append(lines, "    "+l)
		}
	}
	var foot []string
	if v.confirm {
		foot = []string{"", "Four eyes: the person who planned it cannot approve it (any login). " +
			st.Focused.Render("y") + " approve   " + st.Focused.Render("n/esc") + " cancel"}
	}
	body := view.WrapAll(lines, w)
	room := max(1, h-len(head)-len(view.WrapAll(foot, w)))
	v.scroll = max(0, min(v.scroll, len(body)-room))
	body = body[v.scroll:]
	if len(body) > room {
		body = append(body[:room-1], st.Muted.Render(fmt.Sprintf("… %d more lines (↓ scrolls)", len(body)-room+1)))
	}
	return view.FitLines(append(append(head, body...), view.WrapAll(foot, w)...), w, h)
}

func itemsTitle(k PlanKind) string {
	if k == KindAccept {
		return "What each record runs (pointer: stored -> incoming)"
	}
	return "Identities (evidence, amount)"
}
