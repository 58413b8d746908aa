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

	// The identity and the class an operator types next are never cut: their
	// columns take the width of the widest one shown, and the columns that
	// no command needs (last seen, seen, status) give way, named.
	statusW, seenW, lastW := 8, 5, 9
	ids := make([]int64, len(vis))
	identW, clsW := ansi.StringWidth("IDENTITY (tenant/operation)"), ansi.StringWidth("CLASS")
	for i, s := range vis {
		ids[i] = s.ID
		identW = max(identW, ansi.StringWidth(s.Tenant+"/"+s.OperationID))
		clsW = max(clsW, ansi.StringWidth(queueClass(s)))
	}
	idW := view.IDWidth(ids...)
	var hidden []string
	for _, c := range []struct {
		name  string
		width *int
	}{{"last seen", &lastW}, {"seen", &seenW}, {"status", &statusW}} {
		if 2+idW+1+identW+1+clsW+(statusW+1)*sign(statusW)+(seenW+1)*sign(seenW)+(lastW+1)*sign(lastW) <= w {
			break
		}
		*c.width = 0
		hidden = append(hidden, c.name)
	}
	if len(hidden) == 0 {
		// Room to spare goes to the identity.
		identW = max(identW, w-2-idW-clsW-statusW-seenW-lastW-5)
		title += count + updated + loading
	} else {
		// First, before the counts, in the place of the refresh time: what a
		// wider terminal shows.
		title += "  " + st.Warning.Render("hidden: "+strings.Join(hidden, ", ")) + count + loading
	}
	header := st.Column.Render("  " + view.PadLeft("ID", idW) + " " + view.Pad("IDENTITY (tenant/operation)", identW) + " " +
		view.Pad("CLASS", clsW) + optCol(" ", view.Pad("STATUS", statusW), statusW) + optCol(" ", view.PadLeft("SEEN", seenW), seenW) +
		optCol(" ", view.PadLeft("LAST SEEN", lastW), lastW))
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
		class := queueClass(s)
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
			view.Pad(class, clsW) + optCol(" ", status, statusW) + optCol(" ", view.PadLeft(strconv.FormatInt(s.Occurrences, 10), seenW), seenW) +
			optCol(" ", view.PadLeft(view.Ago(now, s.LastSeen), lastW), lastW)
		if i == v.nav.Cursor {
			row = st.Selected.Render(row)
		}
		lines = append(lines, row)
	}
	return view.FitLines(lines, w, h)
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
