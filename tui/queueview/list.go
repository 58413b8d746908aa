package queueview

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/idemctl/idemctl/quarantine"
	"github.com/idemctl/idemctl/tui/view"
)

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
	if v.nav.Handle(k.List, msg, len(vis), v.recordRows()) {
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
	count := "  " + st.Muted.Render(v.countLine())
	updated := ""
	if !v.updated.IsZero() {
		updated = "  " + st.Muted.Render("updated "+v.updated.UTC().Format("15:04:05Z"))
	}
	loading := ""
	if v.loading {
		loading = "  " + st.Muted.Render("loading…")
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

	lay := newListLayout(vis, w)
	if len(lay.hidden) == 0 && !lay.wide {
		title += count + updated + loading
	} else {
		// First, before the counts, in the place of the refresh time: what a
		// wider terminal shows, and where an identity too wide for a row is.
		notes := []string{}
		if len(lay.hidden) > 0 {
			notes = append(notes, "hidden: "+strings.Join(lay.hidden, ", "))
		}
		if lay.wide {
			notes = append(notes, "identity below each row")
		}
		title += "  " + st.Warning.Render(strings.Join(notes, "; ")) + count + loading
	}
	identCol := " " + view.Pad("IDENTITY (tenant/operation)", lay.identW)
	if lay.wide {
		identCol = ""
	}
	header := st.Column.Render("  " + view.PadLeft("ID", lay.idW) + identCol + " " +
		view.Pad("CLASS", lay.clsW) + optCol(" ", view.Pad("STATUS", lay.statusW), lay.statusW) + optCol(" ", view.PadLeft("SEEN", lay.seenW), lay.seenW) +
		optCol(" ", view.PadLeft("LAST SEEN", lay.lastW), lay.lastW))
	lines := []string{view.Trunc(title, w), view.Trunc(searchLine, w), header}

	rows := v.recordRows()
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
		class := queueClass(s)
		marker := "  "
		if i == v.nav.Cursor {
			marker = "> "
		}
		if v.selected[s.ID] {
			marker = marker[:1] + "*"
		}
		status := view.Pad(string(s.Status), lay.statusW)
		if i != v.nav.Cursor {
			// Inside the selected row a nested style would end its background.
			status = v.statusStyle(s.Status).Render(status)
		}
		identCell := " " + view.Pad(s.Tenant+"/"+s.OperationID, lay.identW)
		if lay.wide {
			identCell = ""
		}
		row := []string{marker + view.PadLeft("#"+strconv.FormatInt(s.ID, 10), lay.idW) + identCell + " " +
			view.Pad(class, lay.clsW) + optCol(" ", status, lay.statusW) + optCol(" ", view.PadLeft(strconv.FormatInt(s.Occurrences, 10), lay.seenW), lay.seenW) +
			optCol(" ", view.PadLeft(view.Ago(now, s.LastSeen), lay.lastW), lay.lastW)}
		if lay.wide {
			indent := strings.Repeat(" ", lay.indent())
			for _, l := range identityLines(s.Tenant, s.OperationID, w-lay.indent()) {
				row = append(row, indent+view.Pad(l, w-lay.indent()))
			}
		}
		for _, l := range row {
			if i == v.nav.Cursor {
				l = st.Selected.Render(l)
			}
			lines = append(lines, l)
		}
	}
	return view.FitLines(lines, w, h)
}

// listLayout is the queue list's columns at a width. The identity and the
// class an operator types next are never cut: their columns take the width
// of the widest one shown, and the columns that no command needs (last
// seen, seen, status) give way, named. An identity too wide for its row
// even then (wide) goes on the lines below its row, whole, split after the
// tenant's "/" (and a part wider than the line, wrapped): each row then
// takes perRow lines.
type listLayout struct {
	idW, identW, clsW, statusW, seenW, lastW int
	hidden                                   []string
	wide                                     bool
	perRow                                   int
}

func newListLayout(vis []quarantine.Summary, w int) listLayout {
	l := listLayout{statusW: 8, seenW: 5, lastW: 9, perRow: 1}
	ids := make([]int64, len(vis))
	l.identW, l.clsW = ansi.StringWidth("IDENTITY (tenant/operation)"), ansi.StringWidth("CLASS")
	for i, s := range vis {
		ids[i] = s.ID
		l.identW = max(l.identW, ansi.StringWidth(s.Tenant+"/"+s.OperationID))
		l.clsW = max(l.clsW, ansi.StringWidth(queueClass(s)))
	}
	l.idW = view.IDWidth(ids...)
	l.wide = 2+l.idW+1+l.identW+1+l.clsW > w
	ident := l.identW + 1
	if l.wide {
		ident = 0
	}
	for _, c := range []struct {
		name  string
		width *int
	}{{"last seen", &l.lastW}, {"seen", &l.seenW}, {"status", &l.statusW}} {
		if 2+l.idW+ident+1+l.clsW+(l.statusW+1)*sign(l.statusW)+(l.seenW+1)*sign(l.seenW)+(l.lastW+1)*sign(l.lastW) <= w {
			break
		}
		*c.width = 0
		l.hidden = append(l.hidden, c.name)
	}
	switch {
	case l.wide:
		for _, s := range vis {
			l.perRow = max(l.perRow, 1+len(identityLines(s.Tenant, s.OperationID, w-l.indent())))
		}
	case len(l.hidden) == 0:
		// Room to spare goes to the identity.
		l.identW = max(l.identW, w-2-l.idW-l.clsW-l.statusW-l.seenW-l.lastW-5)
	}
	return l
}

// indent is where a wide layout's identity lines start: under the record's
// id, past the marker.
func (l listLayout) indent() int { return 2 + l.idW + 1 }

// recordRows is how many records the list shows at once: its lines, less
// the title, search and column lines, over the lines a record takes.
func (v *View) recordRows() int {
	return max(1, v.listHeight()/newListLayout(v.visible(), v.c.Width).perRow)
}

// identityLines is an identity in lines of at most w cells, never cut: one
// line when it fits, else the tenant with its "/" and the operation id each
// on lines of their own (a part wider than w wrapped at w).
func identityLines(tenant, op string, w int) []string {
	whole := tenant + "/" + op
	if w <= 0 || ansi.StringWidth(whole) <= w {
		return []string{whole}
	}
	return append(hardWrap(tenant+"/", w), hardWrap(op, w)...)
}

// hardWrap splits s into pieces of at most w cells.
func hardWrap(s string, w int) []string {
	var out []string
	line, lineW := "", 0
	for _, r := range s {
		rw := ansi.StringWidth(string(r))
		if lineW+rw > w && line != "" {
			out = append(out, line)
			line, lineW = "", 0
		}
		line += string(r)
		lineW += rw
	}
	return append(out, line)
}

// queueClass is a record's class as the queue shows it: the stored one, and
// the incoming one when it differs.
func queueClass(s quarantine.Summary) string {
	if s.IncomingClass != s.Class {
		return s.Class + "→" + s.IncomingClass
	}
	return s.Class
}

// optCol is a column that may be hidden (width 0): its separator and cell,
// or nothing.
func optCol(sep, cell string, width int) string {
	if width == 0 {
		return ""
	}
	return sep + cell
}

// sign is 1 for a shown column (width > 0), 0 for a hidden one.
func sign(width int) int {
	if width > 0 {
		return 1
	}
	return 0
}
