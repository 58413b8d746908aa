// Package queueview is the console's quarantine queue: the list of
// conflicting retries with server-side search and paging (list.go), one
// record's evidence (detail.go), the decision on it (actions.go) and the
// triage of many at once: groups, multi-select, bulk reject (triage.go).
package queueview

import (
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"

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

// View is the quarantine queue; the root model owns it and routes messages to it.
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

// New returns the quarantine queue over its service (nil: the view says it is not
// available); it does no I/O until activated.
func New(c *view.Context, svc QuarantineService, refresh time.Duration) *View {
	v := &View{c: c, svc: svc, refresh: refresh, filter: quarantine.StatusOpen}
	v.search = view.NewInput(c, "tenant or operation id", 256)
	v.newOp = view.NewInput(c, "e.g. charge-42-rev2", idem.MaxOperationIDBytes)
	v.reason = view.NewInput(c, "why (a ticket reference helps)", 1000)
	return v
}

// Activate implements view.View.
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

// visible is the page of records the server returned for the search.
func (v *View) visible() []quarantine.Summary { return v.items }

// listHeight is the number of rows the list shows (body minus title,
// search and column lines).
func (v *View) listHeight() int { return max(1, v.c.BodyHeight()-3) }

// Typing implements view.View.
func (v *View) Typing() bool {
	return v.search.Focused() || v.mode == queueForm || v.mode == queueBulkForm
}

// Status implements view.View.
func (v *View) Status() view.Banner { return v.ban }

// Back implements view.View.
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

// Update implements view.View.
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
	v.nav.Clamp(len(vis), v.recordRows())
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

// KeyMap implements view.View.
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

// Render implements view.View.
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
