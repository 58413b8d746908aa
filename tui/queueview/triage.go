package queueview

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/idemctl/idemctl/quarantine"
	"github.com/idemctl/idemctl/tui/keys"
	"github.com/idemctl/idemctl/tui/view"
)

// Triage at incident scale: the queue pages through the server and searches
// on it, shows the total and the oldest open record, groups the open records,
// and rejects a group or a selection after a preview and a confirmation.

// triage is the queue view's state for groups and bulk decisions.
type triage struct {
	// next is the cursor of the page after the one shown.
	next *quarantine.Cursor
	// groupID names the group the list is narrowed to.
	groupID string

	groups   []quarantine.Group
	gnav     view.ListNav
	gloading bool

	// The bulk decision under way: what, a label for it, its preview and
	// result, and the mode to go back to.
	sel     quarantine.Selection
	label   string
	preview *quarantine.Preview
	result  *quarantine.BulkResult
	from    queueMode
	// events carries a running bulk reject's progress, then its end.
	events  chan tea.Msg
	decided int64
}

// Messages of groups and bulk decisions.
type (
	groupsLoadedMsg struct {
		groups []quarantine.Group
		err    error
	}
	bulkPreviewMsg struct {
		preview quarantine.Preview
		err     error
	}
	bulkDoneMsg struct {
		result quarantine.BulkResult
		err    error
	}
	bulkProgressMsg struct{ decided int64 }
)

// countLine is the title's count: the total matching the search, the page,
// the oldest open record's age and the selection.
func (v *View) countLine() string {
	if v.totals == nil {
		return plural(len(v.items), "record")
	}
	t := *v.totals
	s := humanInt(t.Matching) + " records"
	if t.Matching == 1 {
		s = "1 record"
	}
	if t.AtLeast {
		s = "≥" + s
	}
	if len(v.pages) > 0 || v.more {
		s += fmt.Sprintf(" · page %d", len(v.pages)+1)
	}
	if t.OldestOpen != nil {
		s += " · oldest open " + view.Ago(v.c.Now(), *t.OldestOpen)
	}
	if len(v.selected) > 0 {
		s += fmt.Sprintf(" · %d selected", len(v.selected))
	}
	return s
}

// humanInt writes n with thousands separators.
func humanInt(n int64) string {
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 && s[0] != '-' {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// parseSearch reads the search line: a bare word is an operation id prefix;
// tenant:, op:, class:, changed:, source: and since: name the other filters.
func parseSearch(q string, now time.Time) (quarantine.Filter, error) {
	var f quarantine.Filter
	for _, tok := range strings.Fields(q) {
		k, val, ok := strings.Cut(tok, ":")
		if !ok {
			if f.OpPrefix != "" {
				return f, fmt.Errorf("search: one operation id prefix at a time (%q and %q); narrow with tenant:T class:C changed:/p source:S", f.OpPrefix, tok)
			}
			f.OpPrefix = tok
			continue
		}
		switch k {
		case "tenant":
			f.Tenant = val
		case "op":
			f.Op = val
		case "class":
			f.Class = val
		case "changed":
			f.Changed = val
		case "source":
			f.Source = val
		case "since":
			d, err := time.ParseDuration(val)
			if err != nil || d <= 0 {
				return f, fmt.Errorf("search: since:%s: use a duration such as since:2h", val)
			}
			f.Since = now.Add(-d)
		default:
			return f, fmt.Errorf("search: %q: use a prefix of an operation id, or tenant:T op:ID class:C changed:/p source:S since:2h", tok)
		}
	}
	return f, f.Validate()
}

// applySearch runs the search on the server from the first page.
func (v *View) applySearch(q string) tea.Cmd {
	f, err := parseSearch(q, v.c.Now())
	if err != nil {
		v.ban = view.ErrorBanner(err)
		return nil
	}
	v.query, v.where, v.tri.groupID = strings.TrimSpace(q), f, ""
	v.search.SetValue(v.query)
	v.pages, v.nav, v.selected = nil, view.ListNav{}, nil
	return v.load(false)
}

func (v *View) nextPage() tea.Cmd {
	if v.tri.next == nil && v.loading {
		return nil // the next page is on its way (a key repeat): one page a press
	}
	if !v.more || v.tri.next == nil {
		v.ban = view.InfoBanner("this is the last page")
		return nil
	}
	v.pages = append(v.pages, v.tri.next)
	v.tri.next = nil
	v.nav = view.ListNav{}
	return v.load(false)
}

func (v *View) prevPage() tea.Cmd {
	if len(v.pages) == 0 {
		v.ban = view.InfoBanner("this is the first page")
		return nil
	}
	v.pages = v.pages[:len(v.pages)-1]
	v.nav = view.ListNav{}
	return v.load(false)
}

func (v *View) toggleSelect() tea.Cmd {
	vis := v.visible()
	if len(vis) == 0 {
		return nil
	}
	s := vis[v.nav.Cursor]
	if s.Status != quarantine.StatusOpen {
		v.ban = view.WarningBanner("record #%d is already %s: decisions are final", s.ID, s.Status)
		return nil
	}
	if v.selected == nil {
		v.selected = map[int64]bool{}
	}
	if v.selected[s.ID] {
		delete(v.selected, s.ID)
	} else {
		v.selected[s.ID] = true
	}
	v.nav.Handle(v.c.Keys.Queue.List, tea.KeyMsg{Type: tea.KeyDown}, len(vis), v.recordRows())
	return nil
}

func (v *View) selectionOfIDs() (quarantine.Selection, string) {
	ids := make([]int64, 0, len(v.selected))
	for id := range v.selected {
		ids = append(ids, id)
	}
	return quarantine.Selection{IDs: ids}, plural(len(ids), "selected record")
}

func (v *View) showGroups() tea.Cmd {
	v.mode, v.tri.gloading = queueGroups, true
	svc, f := v.svc, v.where
	f.Group = nil
	return func() tea.Msg {
		ctx, cancel := v.c.CmdContext()
		defer cancel()
		gs, err := svc.Groups(ctx, quarantine.GroupOptions{Filter: f, By: quarantine.GroupBy{Source: true}, Limit: quarantine.MaxLimit})
		return groupsLoadedMsg{groups: gs, err: err}
	}
}

// startBulk opens the reason form of a bulk reject.
func (v *View) startBulk(sel quarantine.Selection, label string) tea.Cmd {
	v.tri.from = v.mode
	v.tri.sel, v.tri.label, v.tri.preview, v.tri.result = sel, label, nil, nil
	v.mode, v.action = queueBulkForm, decideReject
	v.reason.SetValue("")
	v.ban = view.Banner{}
	return v.focusField(0)
}

func (v *View) triageBack() (bool, tea.Cmd) {
	switch v.mode {
	case queueGroups:
		v.mode = queueList
		return true, nil
	case queueBulkForm:
		v.blurForm()
		v.mode = v.tri.from
		v.ban = view.InfoBanner("cancelled: nothing was decided")
		return true, nil
	case queueBulkConfirm:
		v.mode = queueBulkForm
		return true, v.focusField(0)
	}
	return false, nil
}

func (v *View) triageUpdate(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case groupsLoadedMsg:
		v.tri.gloading = false
		if msg.err != nil {
			v.ban = view.ErrorBanner(fmt.Errorf("load the groups: %w", msg.err))
			return nil
		}
		v.tri.groups = msg.groups
		v.tri.gnav.Clamp(len(msg.groups), v.listHeight())
	case bulkPreviewMsg:
		if v.mode != queueBulkConfirm {
			return nil
		}
		if msg.err != nil {
			v.ban = view.ErrorBanner(fmt.Errorf("preview: %w", msg.err))
			v.mode = queueBulkForm
			return v.focusField(0)
		}
		p := msg.preview
		v.tri.preview = &p
	case bulkProgressMsg:
		v.tri.decided = msg.decided
		return v.waitBulk()
	case bulkDoneMsg:
		v.tri.events = nil
		v.tri.result = &msg.result
		v.selected = nil
		v.mode = queueList
		r := msg.result
		if msg.err != nil {
			v.ban = view.ErrorBanner(fmt.Errorf("bulk reject stopped after %d decision(s), all committed; reject again to finish: %w", r.Decided, msg.err))
		} else {
			v.ban = view.SuccessBanner("rejected %s (%d already decided, skipped); run %s, audit rows #%d-#%d",
				plural(int(r.Decided), "record"), r.Skipped, r.Run, r.FirstAudit, r.LastAudit)
		}
		if v.where.Group != nil {
			v.where.Group, v.tri.groupID = nil, ""
		}
		v.pages = nil
		return v.load(false)
	}
	return nil
}

func (v *View) triageKey(msg tea.KeyMsg) tea.Cmd {
	switch v.mode {
	case queueGroups:
		return v.groupsKey(msg)
	case queueBulkForm:
		return v.bulkFormKey(msg)
	case queueBulkConfirm:
		k := v.c.Keys.Confirm
		switch {
		case key.Matches(msg, k.Yes):
			if v.tri.preview == nil {
				v.ban = view.InfoBanner("the preview is still loading")
				return nil
			}
			return v.runBulk()
		case key.Matches(msg, k.No):
			v.mode = queueBulkForm
			return v.focusField(0)
		}
	}
	return nil
}

func (v *View) groupsKey(msg tea.KeyMsg) tea.Cmd {
	k := v.c.Keys.Queue
	gs := v.tri.groups
	if v.tri.gnav.Handle(k.List, msg, len(gs), v.listHeight()) {
		return nil
	}
	if len(gs) == 0 {
		if key.Matches(msg, k.Refresh) {
			return v.showGroups()
		}
		return nil
	}
	g := gs[v.tri.gnav.Cursor]
	switch {
	case key.Matches(msg, k.Open):
		key := g.GroupKey
		v.where.Group, v.tri.groupID = &key, g.ID
		v.filter, v.mode, v.pages, v.nav, v.selected = quarantine.StatusOpen, queueList, nil, view.ListNav{}, nil
		return v.load(false)
	case key.Matches(msg, k.Reject):
		f := v.where
		key := g.GroupKey
		f.Group = &key
		return v.startBulk(quarantine.Selection{Filter: f}, fmt.Sprintf("group %s (%s open)", g.ID, humanInt(g.Count)))
	case key.Matches(msg, k.Refresh):
		return v.showGroups()
	case key.Matches(msg, k.Copy):
		return v.copyText(g.ID, "group id")
	}
	return nil
}

func (v *View) bulkFormKey(msg tea.KeyMsg) tea.Cmd {
	k := v.c.Keys.Form
	switch {
	case key.Matches(msg, k.Cancel):
		_, cmd := v.triageBack()
		return cmd
	case key.Matches(msg, k.Submit):
		if strings.TrimSpace(v.reason.Value()) == "" {
			v.ban = view.ErrorBanner(errors.New("a reason is required: it is recorded with every decision and in the audit log"))
			return nil
		}
		v.blurForm()
		v.mode, v.tri.preview = queueBulkConfirm, nil
		v.ban = view.Banner{}
		svc, sel := v.svc, v.tri.sel
		return func() tea.Msg {
			ctx, cancel := v.c.CmdContext()
			defer cancel()
			p, err := svc.PreviewBulk(ctx, sel)
			return bulkPreviewMsg{preview: p, err: err}
		}
	}
	var cmd tea.Cmd
	v.reason, cmd = v.reason.Update(msg)
	return cmd
}

// runBulk rejects in the background; progress and the end come back through
// a channel that waitBulk reads one message at a time. It runs under the
// program's context, not the per-command timeout: quitting stops it between
// batches, and what was committed stays.
func (v *View) runBulk() tea.Cmd {
	v.mode, v.tri.decided = queueBulkRunning, 0
	// The run decides exactly the records the preview counted (those still
	// open): a record that joined the selection since, whatever its id, is
	// left alone, as a token does on the command line.
	svc, op := v.svc, v.c.Operator
	sel := quarantine.Selection{IDs: v.tri.preview.IDs}
	events := make(chan tea.Msg, 16)
	v.tri.events = events
	opts := quarantine.BulkOptions{Operator: op, Reason: strings.TrimSpace(v.reason.Value()),
		Progress: func(r quarantine.BulkResult) {
			select {
			case events <- bulkProgressMsg{decided: r.Decided}:
			default: // the view is behind: a later update follows
			}
		}}
	return func() tea.Msg {
		go func() {
			res, err := svc.RejectBulk(v.c.Base, sel, opts)
			select {
			case events <- bulkDoneMsg{result: res, err: err}:
			case <-v.c.Base.Done():
			}
		}()
		return <-events
	}
}

func (v *View) waitBulk() tea.Cmd {
	events := v.tri.events
	if events == nil {
		return nil
	}
	return func() tea.Msg { return <-events }
}

// copyText puts s on the terminal's clipboard (OSC 52).
func (v *View) copyText(s, what string) tea.Cmd {
	if v.c.Clipboard == nil {
		v.ban = view.WarningBanner("no clipboard on this terminal")
		return nil
	}
	v.c.Clipboard(s)
	v.ban = view.SuccessBanner("copied the %s %s to the clipboard", what, s)
	return nil
}

func (v *View) triageKeyMap() (keys.Bindings, bool) {
	q, k := v.c.Keys.Queue, v.c.Keys
	switch v.mode {
	case queueGroups:
		return keys.Bindings{
			Short: []key.Binding{q.Open, q.Reject, q.Copy, k.Global.Back},
			Full:  [][]key.Binding{{q.Up, q.Down, q.PageUp, q.PageDown, q.Top, q.Bottom}, {q.Open, q.Reject, q.Refresh, q.Copy}},
		}, true
	case queueBulkForm:
		return keys.Bindings{Short: []key.Binding{k.Form.Submit, k.Form.Cancel}}, true
	case queueBulkConfirm:
		return keys.Bindings{Short: []key.Binding{k.Confirm.Yes, k.Confirm.No}}, true
	case queueBulkRunning:
		return keys.Bindings{}, true
	}
	return keys.Bindings{}, false
}

func (v *View) renderTriage(w, h int) string {
	if v.mode == queueGroups {
		return v.renderGroups(w, h)
	}
	return v.renderBulk(w, h)
}

func (v *View) renderGroups(w, h int) string {
	st := v.c.Styles
	gs := v.tri.groups
	var total int64
	for _, g := range gs {
		total += g.Count
	}
	counts := "  " + st.Muted.Render(fmt.Sprintf("%s in %s", plural(int(total), "record"), plural(len(gs), "group")))
	if v.query != "" {
		counts += "  " + st.Label.Render("search ") + v.query
	}
	title := st.Title.Render("Open records by cause")
	// The class and the source (what class: and source: search) are never
	// cut: as wide as the widest; CHANGED gives way, then FIRST and LAST go,
	// named.
	const countW = 7
	seenW, clsW, srcW := 9, len("CLASS"), len("SOURCE")
	for _, g := range gs {
		clsW = max(clsW, lipgloss.Width(groupClass(g)))
		srcW = max(srcW, lipgloss.Width(groupSource(g)))
	}
	fieldsW := w - 2 - countW - clsW - srcW - seenW*2 - 5
	if fieldsW < 10 {
		seenW, fieldsW = 0, max(10, w-2-countW-clsW-srcW-3)
		title += "  " + st.Warning.Render("hidden: first, last")
	}
	title += counts
	header := st.Column.Render("  " + view.PadLeft("COUNT", countW) + " " + view.Pad("CLASS", clsW) + " " + view.Pad("CHANGED", fieldsW) + " " +
		view.Pad("SOURCE", srcW) + optCol(" ", view.PadLeft("FIRST", seenW), seenW) + optCol(" ", view.PadLeft("LAST", seenW), seenW))
	lines := []string{view.Trunc(title, w), st.Muted.Render("enter: list a group's records · x: reject a group · y: copy its id"), header}
	switch {
	case v.tri.gloading && len(gs) == 0:
		lines = append(lines, "", st.Muted.Render("  Grouping the open records…"))
	case len(gs) == 0:
		lines = append(lines, "", st.Muted.Render("  No open records."))
	}
	now := v.c.Now()
	nav := v.tri.gnav
	lines = append(lines, nav.Rows(len(gs), v.listHeight(), st.Selected, func(i int, marker string) string {
		g := gs[i]
		return marker + view.PadLeft(humanInt(g.Count), countW) + " " + view.Pad(groupClass(g), clsW) + " " + view.Pad(g.Changed(), fieldsW) + " " +
			view.Pad(groupSource(g), srcW) + optCol(" ", view.PadLeft(view.Ago(now, g.FirstSeen), seenW), seenW) +
			optCol(" ", view.PadLeft(view.Ago(now, g.LastSeen), seenW), seenW)
	})...)
	return view.FitLines(lines, w, h)
}

// groupClass is a group's class as shown: the stored one, and the incoming
// one when it differs.
func groupClass(g quarantine.Group) string {
	if g.IncomingClass != g.Class {
		return g.Class + "→" + g.IncomingClass
	}
	return g.Class
}

// groupSource is a group's source, or "-".
func groupSource(g quarantine.Group) string {
	if g.Source != nil && *g.Source != "" {
		return *g.Source
	}
	return "-"
}

func (v *View) renderBulk(w, h int) string {
	st := v.c.Styles
	lines := []string{st.Title.Render("Reject " + v.tri.label),
		"Each record will never run; its replays stay refused for ever. Every record gets its own audit row.", ""}
	switch v.mode {
	case queueBulkForm:
		in := v.reason
		in.Width = max(10, w-22)
		lines = append(lines, st.Focused.Render("> "+view.Pad("reason", 18))+in.View(), "",
			st.Muted.Render("enter: preview before deciding · esc: cancel"))
		return view.FitLines(view.WrapAll(lines, w), w, h)
	}
	p := v.tri.preview
	if p == nil {
		lines = append(lines, st.Muted.Render("Counting what this would decide…"))
		return view.FitLines(view.WrapAll(lines, w), w, h)
	}
	row := func(k, val string) { lines = append(lines, st.Label.Render("  "+view.Pad(k, 18))+val) }
	row("open records", humanInt(p.Open))
	if p.Decided > 0 {
		row("already decided", humanInt(p.Decided)+" (skipped)")
	}
	if p.Filter != nil {
		row("filter", p.Filter.Describe())
	}
	if v.c.Who != "" {
		row("decided by", v.c.Who) // who the database records, not the label
	}
	row("operator", v.c.Operator)
	row("reason", strings.TrimSpace(v.reason.Value()))
	lines = append(lines, "", st.Label.Render(fmt.Sprintf("  sample (%d of %s)", len(p.Sample), humanInt(p.Open))))
	for _, s := range p.Sample {
		lines = append(lines, "    "+view.PadLeft("#"+strconv.FormatInt(s.ID, 10), 8)+" "+s.Tenant+"/"+s.OperationID+"  "+
			st.Muted.Render(plural(s.Changes, "change")))
	}
	lines = append(lines, "", "These decisions are final and are recorded in the audit log.")
	if v.mode == queueBulkRunning {
		lines = append(lines, "", st.StepRunning.Render(fmt.Sprintf("Rejecting in batches… %s of %s", humanInt(v.tri.decided), humanInt(p.Open))))
	} else {
		lines = append(lines, "", st.Focused.Render("y")+" reject them all   "+st.Focused.Render("n/esc")+" back to the form")
	}
	return view.FitLines(view.WrapAll(lines, w), w, h)
}
