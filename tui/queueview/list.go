package queueview

import (
	"fmt"
	"strconv"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

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
