package queueview

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/idemctl/idemctl/audit"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/quarantine"
	"github.com/idemctl/idemctl/tui/keys"
	"github.com/idemctl/idemctl/tui/view"
)

// QueuePageSize is how many records one page of the queue holds (newest
// activity first); ] and [ page through the server, / searches on it.
const QueuePageSize = 100

// queueMode is where the queue view stands.
type queueMode int

const (
	queueList queueMode = iota
	queueDetail
	queueForm
	queueConfirm
	queueDeciding
	queueGroups
	queueBulkForm
	queueBulkConfirm
	queueBulkRunning
)

// decision is the action a form prepares.
type decision int

const (
	decideReject decision = iota + 1
	decideAccept
)

func (d decision) verb() string {
	if d == decideAccept {
		return "accept as new"
	}
	return "reject"
}

// Messages of the queue view.
type (
	// TickMsg reloads the queue: the auto-refresh sends it every refresh.
	TickMsg        struct{}
	queueLoadedMsg struct {
		seq    int
		auto   bool
		page   quarantine.Page
		totals quarantine.Totals
		err    error
	}
	recordLoadedMsg struct {
		id  int64
		rec quarantine.Record
		err error
	}
	decidedMsg struct {
		action decision
		id     int64
		rec    quarantine.Record
		acc    *quarantine.Acceptance
		// plan: the record is of a money class; its accept-as-new was
		// planned for another person to approve, nothing ran.
		plan *quarantine.AcceptPlan
		err  error
	}
)

var statusCycle = []quarantine.Status{quarantine.StatusOpen, quarantine.StatusRejected, quarantine.StatusAccepted, quarantine.StatusAll}

type View struct {
	c       *view.Context
	svc     QuarantineService
	refresh time.Duration

	mode   queueMode
	filter quarantine.Status
	items  []quarantine.Summary
	more   bool
	// The server-side search (/) and the pages: pages[i] is the cursor the
	// i-th page starts after (nil for the first).
	where    quarantine.Filter
	pages    []*quarantine.Cursor
	totals   *quarantine.Totals
	selected map[int64]bool
	tri      triage
	nav      view.ListNav
	loading  bool
	loaded   bool
	seq      int
	chained  bool // the auto-refresh tick chain runs
	updated  time.Time
	query    string
	search   textinput.Model
	ban      view.Banner

	// detail
	detailID int64
	rec      *quarantine.Record
	dtop     int

	// decision form
	action decision
	newOp  textinput.Model
	reason textinput.Model
	focus  int
}

func New(c *view.Context, svc QuarantineService, refresh time.Duration) *View {
	v := &View{c: c, svc: svc, refresh: refresh, filter: quarantine.StatusOpen}
	v.search = view.NewInput(c, "tenant or operation id", 256)
	v.newOp = view.NewInput(c, "e.g. charge-42-rev2", idem.MaxOperationIDBytes)
	v.reason = view.NewInput(c, "why (a ticket reference helps)", 1000)
	return v
}

func (v *View) Activate() tea.Cmd {
	if v.svc == nil {
		v.ban = view.WarningBanner("the quarantine service is not available")
		return nil
	}
	if !v.chained {
		v.chained = true
		return v.load(true)
	}
	return v.load(false)
}

// load lists the queue; an auto load schedules the next tick when it returns.
func (v *View) load(auto bool) tea.Cmd {
	if v.svc == nil {
		return nil
	}
	v.seq++
	v.loading = true
	f := v.where
	f.Status, f.Limit = v.filter, QueuePageSize
	if n := len(v.pages); n > 0 {
		f.After = v.pages[n-1]
	}
	seq, svc := v.seq, v.svc
	return func() tea.Msg {
		ctx, cancel := v.c.CmdContext()
		defer cancel()
		page, err := svc.List(ctx, f)
		if err != nil {
			return queueLoadedMsg{seq: seq, auto: auto, err: err}
		}
		totals, err := svc.Count(ctx, f)
		return queueLoadedMsg{seq: seq, auto: auto, page: page, totals: totals, err: err}
	}
}

func (v *View) tick() tea.Cmd {
	if v.refresh <= 0 {
		return nil
	}
	return tea.Tick(v.refresh, func(time.Time) tea.Msg { return TickMsg{} })
}

// Open shows one record's evidence (also from the resolve view).
func (v *View) Open(id int64) tea.Cmd {
	v.mode = queueDetail
	v.detailID, v.dtop = id, 0
	if v.rec != nil && v.rec.ID != id {
		v.rec = nil
	}
	return v.loadRecord(id)
}

func (v *View) loadRecord(id int64) tea.Cmd {
	if v.svc == nil {
		return nil
	}
	svc := v.svc
	return func() tea.Msg {
		ctx, cancel := v.c.CmdContext()
		defer cancel()
		rec, err := svc.Show(ctx, id)
		return recordLoadedMsg{id: id, rec: rec, err: err}
	}
}

// visible is the page of records the server returned for the search.
func (v *View) visible() []quarantine.Summary { return v.items }

// listHeight is the number of rows the list shows (body minus title,
// search and column lines).
func (v *View) listHeight() int { return max(1, v.c.BodyHeight()-3) }

func (v *View) detailHeight() int { return max(1, v.c.BodyHeight()-1) }

func (v *View) Typing() bool {
	return v.search.Focused() || v.mode == queueForm || v.mode == queueBulkForm
}

func (v *View) Status() view.Banner { return v.ban }

func (v *View) Back() (bool, tea.Cmd) {
	if ok, cmd := v.triageBack(); ok {
		return true, cmd
	}
	switch v.mode {
	case queueConfirm:
		v.mode = queueForm
		return true, v.focusField(v.focus)
	case queueDetail:
		v.mode = queueList
		return true, nil
	case queueList:
		if len(v.selected) > 0 {
			v.selected = nil
			v.ban = view.InfoBanner("selection cleared")
			return true, nil
		}
		if v.query != "" || v.where.Group != nil {
			return true, v.applySearch("")
		}
	}
	return false, nil
}

func (v *View) Update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case TickMsg:
		return v.load(true)
	case queueLoadedMsg:
		return v.loadedPage(msg)
	case recordLoadedMsg:
		if msg.id != v.detailID {
			return nil
		}
		if msg.err != nil {
			v.ban = view.ErrorBanner(msg.err)
			return nil
		}
		rec := msg.rec
		v.rec = &rec
		return nil
	case decidedMsg:
		return v.decided(msg)
	case groupsLoadedMsg, bulkPreviewMsg, bulkDoneMsg, bulkProgressMsg:
		return v.triageUpdate(msg)
	case tea.KeyMsg:
		return v.key(msg)
	}
	return nil
}

func (v *View) loadedPage(msg queueLoadedMsg) tea.Cmd {
	var next tea.Cmd
	if msg.auto {
		next = v.tick()
	}
	if msg.seq != v.seq {
		return next // a newer load is on its way
	}
	v.loading = false
	v.c.Disconnected = msg.err != nil && view.Unreachable(msg.err)
	if msg.err != nil {
		v.ban = view.ErrorBanner(fmt.Errorf("load the queue: %w", msg.err))
		return next
	}
	var selected int64
	if vis := v.visible(); v.nav.Cursor < len(vis) {
		selected = vis[v.nav.Cursor].ID
	}
	v.items, v.more, v.loaded = msg.page.Items, msg.page.Next != nil, true
	totals := msg.totals
	v.totals = &totals
	if v.more {
		v.tri.next = msg.page.Next
	} else {
		v.tri.next = nil
	}
	v.updated = v.c.Now()
	if v.ban.Kind == view.BannerError && strings.HasPrefix(v.ban.Text, "load the queue") {
		v.ban = view.Banner{}
	}
	vis := v.visible()
	for i, s := range vis {
		if s.ID == selected {
			v.nav.Cursor = i
			break
		}
	}
	v.nav.Clamp(len(vis), v.listHeight())
	return next
}

func (v *View) key(msg tea.KeyMsg) tea.Cmd {
	if v.search.Focused() {
		return v.searchKey(msg)
	}
	switch v.mode {
	case queueList:
		return v.listKey(msg)
	case queueGroups, queueBulkForm, queueBulkConfirm, queueBulkRunning:
		return v.triageKey(msg)
	case queueDetail:
		return v.detailKey(msg)
	case queueForm:
		return v.formKey(msg)
	case queueConfirm:
		return v.confirmKey(msg)
	}
	return nil
}

func (v *View) searchKey(msg tea.KeyMsg) tea.Cmd {
	switch msg.Type {
	case tea.KeyEnter:
		v.search.Blur()
		return v.applySearch(v.search.Value())
	case tea.KeyEsc:
		v.search.Blur()
		v.search.SetValue(v.query)
		return nil
	}
	var cmd tea.Cmd
	v.search, cmd = v.search.Update(msg)
	return cmd
}

func (v *View) listKey(msg tea.KeyMsg) tea.Cmd {
	k := v.c.Keys.Queue
	vis := v.visible()
	if v.nav.Handle(k.List, msg, len(vis), v.listHeight()) {
		return nil
	}
	switch {
	case key.Matches(msg, k.Open):
		if len(vis) == 0 {
			return nil
		}
		return v.Open(vis[v.nav.Cursor].ID)
	case key.Matches(msg, k.Status):
		for i, s := range statusCycle {
			if s == v.filter {
				v.filter = statusCycle[(i+1)%len(statusCycle)]
				break
			}
		}
		v.nav, v.pages, v.selected = view.ListNav{}, nil, nil
		v.items, v.loaded = nil, false
		return v.load(false)
	case key.Matches(msg, k.NextPage):
		return v.nextPage()
	case key.Matches(msg, k.PrevPage):
		return v.prevPage()
	case key.Matches(msg, k.Select):
		return v.toggleSelect()
	case key.Matches(msg, k.Groups):
		return v.showGroups()
	case key.Matches(msg, k.Copy):
		if len(vis) > 0 {
			return v.copyText(strconv.FormatInt(vis[v.nav.Cursor].ID, 10), "record id")
		}
		return nil
	case key.Matches(msg, k.Search):
		v.search.SetValue(v.query)
		v.search.CursorEnd()
		return v.search.Focus()
	case key.Matches(msg, k.Refresh):
		return v.load(false)
	case key.Matches(msg, k.Reject):
		if len(v.selected) > 0 {
			return v.startBulk(v.selectionOfIDs())
		}
		v.ban = view.InfoBanner("open a record (enter) to review its evidence, or select records with space to reject them together")
	case key.Matches(msg, k.Accept):
		v.ban = view.InfoBanner("open a record (enter) to review its evidence before deciding")
	}
	return nil
}

func (v *View) detailKey(msg tea.KeyMsg) tea.Cmd {
	k := v.c.Keys.Queue
	total := len(v.detailLines(v.c.Width))
	h := v.detailHeight()
	switch {
	case key.Matches(msg, k.Up):
		v.dtop--
	case key.Matches(msg, k.Down):
		v.dtop++
	case key.Matches(msg, k.PageUp):
		v.dtop -= h
	case key.Matches(msg, k.PageDown):
		v.dtop += h
	case key.Matches(msg, k.Top):
		v.dtop = 0
	case key.Matches(msg, k.Bottom):
		v.dtop = total
	case key.Matches(msg, k.Refresh):
		return v.loadRecord(v.detailID)
	case key.Matches(msg, k.Reject):
		return v.startForm(decideReject)
	case key.Matches(msg, k.Accept):
		return v.startForm(decideAccept)
	case key.Matches(msg, k.Copy):
		if v.rec != nil {
			return v.copyText(v.rec.IncomingHash, "incoming hash")
		}
	}
	v.dtop = max(0, min(v.dtop, total-h))
	return nil
}

func (v *View) startForm(d decision) tea.Cmd {
	if v.rec == nil {
		v.ban = view.InfoBanner("the record is still loading")
		return nil
	}
	if v.rec.Status != quarantine.StatusOpen {
		by := ""
		if v.rec.Decision != nil {
			by = " by " + v.rec.Decision.By
		}
		v.ban = view.WarningBanner("record #%d was already %s%s: decisions are final", v.rec.ID, v.rec.Status, by)
		return nil
	}
	v.action, v.mode = d, queueForm
	v.reason.SetValue("")
	v.newOp.SetValue("")
	v.ban = view.Banner{}
	return v.focusField(0)
}

// fields are the form's inputs in tab order.
func (v *View) fields() []*textinput.Model {
	if v.action == decideAccept {
		return []*textinput.Model{&v.newOp, &v.reason}
	}
	return []*textinput.Model{&v.reason}
}

func (v *View) focusField(i int) tea.Cmd {
	fs := v.fields()
	v.focus = (i + len(fs)) % len(fs)
	for j, f := range fs {
		if j != v.focus {
			f.Blur()
		}
	}
	return fs[v.focus].Focus()
}

func (v *View) blurForm() {
	for _, f := range v.fields() {
		f.Blur()
	}
}

func (v *View) formKey(msg tea.KeyMsg) tea.Cmd {
	k := v.c.Keys.Form
	switch {
	case key.Matches(msg, k.Cancel):
		v.blurForm()
		v.mode = queueDetail
		v.ban = view.InfoBanner("cancelled: nothing was decided")
		return nil
	case key.Matches(msg, k.Next):
		return v.focusField(v.focus + 1)
	case key.Matches(msg, k.Prev):
		return v.focusField(v.focus - 1)
	case key.Matches(msg, k.Submit):
		if err := v.validateForm(); err != nil {
			v.ban = view.ErrorBanner(err)
			return nil
		}
		v.blurForm()
		v.mode = queueConfirm
		v.ban = view.Banner{}
		return nil
	}
	var cmd tea.Cmd
	f := v.fields()[v.focus]
	*f, cmd = f.Update(msg)
	return cmd
}

// validateForm checks the form before the confirmation, as the domain will.
func (v *View) validateForm() error {
	if strings.TrimSpace(v.reason.Value()) == "" {
		return errors.New("a reason is required: it is recorded with the decision and in the audit log")
	}
	if v.action == decideAccept {
		op := strings.TrimSpace(v.newOp.Value())
		if op == "" {
			return errors.New("a new operation id is required: the payload runs once under it")
		}
		if err := (idem.Identity{TenantID: v.rec.Tenant, OperationID: op}).Validate(); err != nil {
			return err
		}
		if op == v.rec.OperationID {
			return fmt.Errorf("the new operation id must differ from the conflicting one (%s)", op)
		}
	}
	return nil
}

func (v *View) confirmKey(msg tea.KeyMsg) tea.Cmd {
	k := v.c.Keys.Confirm
	switch {
	case key.Matches(msg, k.Yes):
		return v.decide()
	case key.Matches(msg, k.No):
		v.mode = queueForm
		return v.focusField(v.focus)
	}
	return nil
}

func (v *View) decide() tea.Cmd {
	v.mode = queueDeciding
	id, action, svc, op := v.rec.ID, v.action, v.svc, v.c.Operator
	reason, newOp := strings.TrimSpace(v.reason.Value()), strings.TrimSpace(v.newOp.Value())
	return func() tea.Msg {
		ctx, cancel := v.c.CmdContext()
		defer cancel()
		if action == decideAccept {
			acc, err := svc.AcceptAsNew(ctx, id, newOp, op, reason)
			if errors.Is(err, quarantine.ErrNeedsSecondPerson) {
				plan, err := svc.PlanAcceptOne(ctx, id, newOp, op, reason)
				return decidedMsg{action: action, id: id, plan: &plan, err: err}
			}
			return decidedMsg{action: action, id: id, rec: acc.Record, acc: &acc, err: err}
		}
		rec, err := svc.Reject(ctx, id, op, reason)
		return decidedMsg{action: action, id: id, rec: rec, err: err}
	}
}

func (v *View) decided(msg decidedMsg) tea.Cmd {
	if msg.err != nil {
		v.ban = view.ErrorBanner(fmt.Errorf("%s #%d refused: %w", msg.action.verb(), msg.id, msg.err))
		if errors.Is(msg.err, quarantine.ErrAlreadyDecided) || errors.Is(msg.err, quarantine.ErrNotFound) {
			v.mode = queueDetail
			return v.loadRecord(msg.id)
		}
		v.mode = queueForm
		return v.focusField(v.focus)
	}
	if msg.plan != nil {
		v.mode = queueDetail
		v.ban = view.SuccessBanner("#%d is of a money class: planned as accept-as-new plan #%d, nothing ran; another person approves it (6 Approvals)",
			msg.id, msg.plan.ID)
		return v.loadRecord(msg.id)
	}
	rec := msg.rec
	v.rec, v.detailID, v.mode, v.dtop = &rec, rec.ID, queueDetail, 0
	audit := ""
	if rec.Decision != nil {
		audit = fmt.Sprintf("; audit row #%d", rec.Decision.AuditID)
	}
	if msg.action == decideAccept && msg.acc != nil {
		v.ban = view.SuccessBanner("accepted #%d as new operation %s/%s: %s%s",
			rec.ID, rec.Tenant, rec.Decision.NewOperationID, msg.acc.Outcome, audit)
	} else {
		v.ban = view.SuccessBanner("rejected #%d: it will never run, replays stay refused%s", rec.ID, audit)
	}
	return v.load(false)
}

func (v *View) KeyMap() help.KeyMap {
	k := v.c.Keys
	q := k.Queue
	switch {
	case v.search.Focused():
		return keys.Bindings{Short: []key.Binding{
			key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "apply")),
			key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "clear")),
		}}
	case v.mode == queueDetail:
		return keys.Bindings{
			Short: []key.Binding{q.Reject, q.Accept, q.Down, k.Global.Back},
			Full:  [][]key.Binding{{q.Up, q.Down, q.PageUp, q.PageDown, q.Top, q.Bottom}, {q.Reject, q.Accept, q.Refresh}},
		}
	case v.mode == queueForm:
		return keys.Bindings{Short: []key.Binding{k.Form.Submit, k.Form.Next, k.Form.Cancel}}
	case v.mode == queueConfirm:
		return keys.Bindings{Short: []key.Binding{k.Confirm.Yes, k.Confirm.No}}
	case v.mode == queueDeciding:
		return keys.Bindings{}
	}
	if km, ok := v.triageKeyMap(); ok {
		return km
	}
	return keys.Bindings{
		Short: []key.Binding{q.Open, q.Search, q.NextPage, q.Select, q.Groups, q.Status},
		Full: [][]key.Binding{{q.Up, q.Down, q.PageUp, q.PageDown, q.Top, q.Bottom, q.NextPage, q.PrevPage},
			{q.Open, q.Status, q.Search, q.Refresh, q.Groups}, {q.Select, q.Reject, q.Accept, q.Copy}},
	}
}

// render

// tall: the evidence of a record uses every line it can get.
func (v *View) Tall() bool { return v.mode == queueDetail }

func (v *View) Render(w, h int) string {
	switch v.mode {
	case queueDetail:
		return v.renderDetail(w, h)
	case queueForm:
		return v.renderForm(w, h)
	case queueConfirm, queueDeciding:
		return v.renderConfirm(w, h)
	case queueGroups, queueBulkForm, queueBulkConfirm, queueBulkRunning:
		return v.renderTriage(w, h)
	}
	return v.renderList(w, h)
}

func (v *View) statusStyle(s quarantine.Status) lipgloss.Style {
	st := v.c.Styles
	switch s {
	case quarantine.StatusOpen:
		return st.Open
	case quarantine.StatusRejected:
		return st.Rejected
	case quarantine.StatusAccepted:
		return st.Accepted
	}
	return st.Muted
}

func (v *View) renderList(w, h int) string {
	st := v.c.Styles
	vis := v.visible()
	title := st.Title.Render("Quarantine queue") + "  " + st.Label.Render("status ") + string(v.filter)
	title += "  " + st.Muted.Render(v.countLine())
	if !v.updated.IsZero() {
		title += "  " + st.Muted.Render("updated "+v.updated.UTC().Format("15:04:05Z"))
	}
	if v.loading {
		title += "  " + st.Muted.Render("loading…")
	}
	searchLine := st.Label.Render("search ")
	switch {
	case v.search.Focused():
		searchLine = st.Focused.Render("search ") + v.search.View()
	case v.where.Group != nil:
		searchLine += "group " + v.tri.groupID + st.Muted.Render("  (esc clears)")
	case v.query != "":
		searchLine += v.query + st.Muted.Render("  (esc clears)")
	default:
		searchLine += st.Muted.Render("/ op id prefix, or tenant: class: changed:/amount source:")
	}

	clsW := 14
	if w >= 110 {
		clsW = 20
	}
	const statusW, seenW, lastW = 8, 5, 9
	ids := make([]int64, len(vis))
	for i, s := range vis {
		ids[i] = s.ID
	}
	idW := view.IDWidth(ids...)
	identW := max(10, w-2-idW-clsW-statusW-seenW-lastW-5)
	header := st.Column.Render("  " + view.PadLeft("ID", idW) + " " + view.Pad("IDENTITY (tenant/operation)", identW) + " " +
		view.Pad("CLASS", clsW) + " " + view.Pad("STATUS", statusW) + " " + view.PadLeft("SEEN", seenW) + " " + view.PadLeft("LAST SEEN", lastW))
	lines := []string{view.Trunc(title, w), view.Trunc(searchLine, w), header}

	rows := v.listHeight()
	switch {
	case v.svc == nil:
		lines = append(lines, "", st.Warning.Render("  The quarantine service is not available."))
	case !v.loaded && v.loading:
		lines = append(lines, "", st.Muted.Render("  Loading the queue…"))
	case len(vis) == 0 && (v.query != "" || v.where.Group != nil):
		lines = append(lines, "", st.Muted.Render(fmt.Sprintf("  No %s record matches the search.", v.filter)))
	case len(vis) == 0:
		lines = append(lines, "", st.Muted.Render(fmt.Sprintf("  No %s records. Conflicting retries show up here when they arrive.", v.filter)))
	}
	now := v.c.Now()
	for i := v.nav.Top; i < len(vis) && i < v.nav.Top+rows; i++ {
		s := vis[i]
		class := s.Class
		if s.IncomingClass != s.Class {
			class = s.Class + "→" + s.IncomingClass
		}
		marker := "  "
		if i == v.nav.Cursor {
			marker = "> "
		}
		if v.selected[s.ID] {
			marker = marker[:1] + "*"
		}
		status := view.Pad(string(s.Status), statusW)
		if i != v.nav.Cursor {
			// Inside the selected row a nested style would end its background.
			status = v.statusStyle(s.Status).Render(status)
		}
		row := marker + view.PadLeft("#"+strconv.FormatInt(s.ID, 10), idW) + " " + view.Pad(s.Tenant+"/"+s.OperationID, identW) + " " +
			view.Pad(class, clsW) + " " + status + " " + view.PadLeft(strconv.FormatInt(s.Occurrences, 10), seenW) + " " +
			view.PadLeft(view.Ago(now, s.LastSeen), lastW)
		if i == v.nav.Cursor {
			row = st.Selected.Render(row)
		}
		lines = append(lines, row)
	}
	return view.FitLines(lines, w, h)
}

// detailLines is the evidence of the open record, as lines of at most w cells.
func (v *View) detailLines(w int) []string {
	st := v.c.Styles
	r := v.rec
	if r == nil {
		return []string{st.Muted.Render(fmt.Sprintf("Loading record #%d…", v.detailID))}
	}
	now := v.c.Now()
	var lines []string
	add := func(l ...string) { lines = append(lines, l...) }
	label := func(s string) string { return st.Label.Render(s) }

	add(st.Title.Render(fmt.Sprintf("#%d  %s/%s", r.ID, r.Tenant, r.OperationID)) + "  " +
		v.statusStyle(r.Status).Render(strings.ToUpper(string(r.Status))))
	cls := label("class ") + r.Class
	if r.IncomingClass != r.Class {
		cls = st.DiffPath.Render("! class differs: ") + st.DiffStored.Render("stored "+r.Class) + ", " +
			st.DiffIncoming.Render("incoming "+r.IncomingClass)
	}
	add(cls + "  " + label("seen ") + plural(int(r.Occurrences), "time"))
	add(label("first ") + view.Stamp(r.FirstSeen) + "  " + label("last ") + view.Stamp(r.LastSeen) + " (" + view.Ago(now, r.LastSeen) + ")")
	det := label("detected by ") + view.OrDash(r.Detected.ApplicationName) + label(" as db user ") + view.OrDash(r.Detected.DBUser)
	if r.Detected.Operator != "" {
		det += label(" operator ") + r.Detected.Operator
	}
	add(det, "")

	add(st.Title.Render("Hashes") + st.Muted.Render(" (canonical RFC 8785, SHA-256)"))
	hashLine := func(name string, style lipgloss.Style, hash string) {
		marker := "! "
		if r.StoredHash == r.IncomingHash {
			marker = "  "
		}
		if w >= 14+len(hash) {
			add(marker + label(view.Pad(name, 10)) + style.Render(hash))
		} else {
			add(marker+label(name), "    "+style.Render(hash))
		}
	}
	stored := r.StoredHash
	if r.StoredSide == quarantine.StoredProvider {
		stored = "(none: nothing here holds this identity)"
	}
	hashLine("stored", st.HashStored, stored)
	hashLine("incoming", st.HashIncoming, r.IncomingHash)
	add("")
	if r.StoredSide == quarantine.StoredProvider {
		add(st.Title.Render("The provider's answer") + st.Muted.Render(" (the key was used there with another payload)"))
		for _, l := range view.Wrap(string(r.StoredResponse), max(10, w-4)) {
			add("  " + l)
		}
		add("")
	}

	add(st.Title.Render(fmt.Sprintf("Differing fields (%d)", len(r.Diff))) + st.Muted.Render(" JSON Pointer, stored → incoming"))
	if len(r.Diff) == 0 {
		add(st.Muted.Render("  none recorded (the class differs, or the diff was not computed)"))
	}
	for _, ch := range r.Diff {
		path := ch.Path
		if path == "" {
			path = "(whole payload)"
		}
		if ch.Kind == quarantine.ChangeStoredPurged {
			add("! " + st.DiffPath.Render(storedPurged(ch)) + " " +
				st.Muted.Render("only the stored hash and class remain; nothing to compare"))
		} else {
			add("! " + st.DiffPath.Render(path) + " " + st.Muted.Render(ch.Kind))
		}
		valueLines := func(name string, style lipgloss.Style, raw []byte) {
			text := string(raw)
			if len(raw) == 0 {
				text = "null"
			}
			wrapped := view.Wrap(text, max(10, w-14))
			for i, l := range wrapped {
				prefix := "    " + label(view.Pad(name, 10))
				if i > 0 {
					prefix = strings.Repeat(" ", 14)
				}
				add(prefix + style.Render(l))
			}
		}
		valueLines("stored", st.DiffStored, ch.Stored)
		valueLines("incoming", st.DiffIncoming, ch.Incoming)
	}
	add("")

	add(st.Title.Render("Decision"))
	if d := r.Decision; d != nil {
		add("  " + v.statusStyle(r.Status).Render(string(r.Status)) + label(" by ") + audit.Who(d.Person, d.DBUser) +
			label(" at ") + view.Stamp(d.At) + label(" audit row ") + fmt.Sprintf("#%d", d.AuditID))
		add("  " + label("operator ") + d.By)
		add(view.Indent("  ", view.Wrap(label("reason ")+d.Reason, max(10, w-2)))...)
		if d.NewOperationID != "" {
			add("  " + label("ran as ") + r.Tenant + "/" + d.NewOperationID + label(" outcome ") + d.NewOutcome)
		}
	} else {
		add("  " + st.Open.Render("waiting for a decision") + st.Muted.Render("  x reject · a accept as new"))
	}
	add("")

	block := func(title string, raw []byte) {
		add(st.Title.Render(title))
		add(view.Indent("  ", view.Wrap(view.PrettyJSON(raw), max(10, w-2)))...)
	}
	block("Saved response (of the stored operation)", r.StoredResponse)
	block("Stored payload", r.StoredPayload)
	block("Incoming payload (did not run)", r.IncomingPayload)
	if len(r.IncomingTransport) > 0 && string(r.IncomingTransport) != "null" {
		block("Incoming transport (tracing only)", r.IncomingTransport)
	}
	return lines
}

// storedPurged names the purge that removed a conflict's stored side:
// "stored body purged 2026-11-02 (plan 7)".
func storedPurged(ch quarantine.Change) string {
	s := "stored body purged"
	if ch.PurgedAt != nil {
		s += " " + ch.PurgedAt.UTC().Format("2006-01-02")
	}
	if ch.PurgePlan != nil {
		s += fmt.Sprintf(" (plan %d)", *ch.PurgePlan)
	}
	return s
}

func (v *View) renderDetail(w, h int) string {
	st := v.c.Styles
	lines := v.detailLines(w)
	top := max(0, min(v.dtop, len(lines)-(h-1)))
	end := min(len(lines), top+h-1)
	out := append([]string{}, lines[top:end]...)
	for len(out) < h-1 {
		out = append(out, "")
	}
	pos := st.Muted.Render(fmt.Sprintf("lines %d-%d of %d  ↑/↓ scroll  esc back to the list", top+1, end, len(lines)))
	return view.FitLines(append(out, pos), w, h)
}

func (v *View) formHeader(w int) []string {
	st := v.c.Styles
	r := v.rec
	var lines []string
	if v.action == decideAccept {
		lines = append(lines, st.Title.Render(fmt.Sprintf("Accept #%d as a new operation", r.ID)),
			fmt.Sprintf("The incoming payload runs once, now, under tenant %s and the new operation id,", r.Tenant),
			"through the atomic executor, in the transaction that records the decision.")
	} else {
		lines = append(lines, st.Title.Render(fmt.Sprintf("Reject #%d", r.ID)),
			"The conflicting request will never run; its replays stay refused for ever.")
	}
	lines = append(lines, st.Label.Render("identity ")+r.Tenant+"/"+r.OperationID+st.Label.Render("  class ")+r.IncomingClass)
	lines = append(lines, view.Labelled("incoming hash", st.Label, st.HashIncoming.Render(r.IncomingHash), w, 2)...)
	return append(lines, "")
}

func (v *View) renderForm(w, h int) string {
	st := v.c.Styles
	lines := v.formHeader(w)
	field := func(i int, name string, in textinput.Model) {
		lbl := "  " + view.Pad(name, 18)
		if i == v.focus {
			lbl = st.Focused.Render("> " + view.Pad(name, 18))
		} else {
			lbl = st.Label.Render(lbl)
		}
		in.Width = max(10, w-22)
		lines = append(lines, lbl+in.View())
	}
	if v.action == decideAccept {
		field(0, "new operation id", v.newOp)
		field(1, "reason", v.reason)
	} else {
		field(0, "reason", v.reason)
	}
	lines = append(lines, "", st.Muted.Render("enter: review before deciding · tab: next field · esc: cancel"))
	return view.FitLines(view.WrapAll(lines, w), w, h)
}

func (v *View) renderConfirm(w, h int) string {
	st := v.c.Styles
	r := v.rec
	lines := []string{st.Warning.Render(fmt.Sprintf("Confirm: %s quarantine #%d", v.action.verb(), r.ID)), ""}
	row := func(k, val string) { lines = append(lines, st.Label.Render("  "+view.Pad(k, 18))+val) }
	row("identity", r.Tenant+"/"+r.OperationID)
	if v.action == decideAccept {
		row("runs as", r.Tenant+"/"+strings.TrimSpace(v.newOp.Value()))
		row("class", r.IncomingClass)
	}
	row("operator", v.c.Operator)
	row("reason", strings.TrimSpace(v.reason.Value()))
	lines = append(lines, "", "This decision is final and is recorded in the audit log.")
	if v.mode == queueDeciding {
		lines = append(lines, "", st.StepRunning.Render("Recording the decision…"))
	} else {
		lines = append(lines, "", st.Focused.Render("y")+" confirm   "+st.Focused.Render("n/esc")+" back to the form")
	}
	return view.FitLines(view.WrapAll(lines, w), w, h)
}

// plural renders "1 record", "2 records".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
