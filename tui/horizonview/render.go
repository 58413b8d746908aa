// Package horizonview is the console's purge horizon: the replay sources
// with their last probe, the purge plans, the four-eyes approval and the
// purge itself with its progress.
package horizonview

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/charmbracelet/lipgloss"

	"github.com/idemctl/idemctl/tui/view"
)

func (v *View) planStyle(s PlanState) lipgloss.Style {
	st := v.c.Styles
	switch s {
	case PlanPlanned:
		return st.Open
	case PlanApproved, PlanDone:
		return st.Accepted
	case PlanPurging:
		return st.StepRunning
	case PlanAborted:
		return st.Rejected
	}
	return st.Muted
}

// Render implements view.View.
func (v *View) Render(w, h int) string {
	st := v.c.Styles
	if v.svc == nil {
		return view.FitLines([]string{
			st.Title.Render("Purge horizon"), "",
			st.Warning.Render("  The horizon service is not available in this build."),
			st.Muted.Render("  Sources, plans, approval and purge appear here once package horizon is wired in."),
		}, w, h)
	}
	if v.confirm != 0 {
		return v.renderConfirm(w, h)
	}
	now := v.c.Now()
	proven := 0
	for _, s := range v.sources {
		if s.Proven {
			proven++
		}
	}
	title := st.Title.Render("Purge horizon") + st.Muted.Render(fmt.Sprintf("  %d/%d sources proven closed · %d plans", proven, len(v.sources), len(v.plans)))
	if v.list.Loading {
		title += st.Muted.Render("  loading…")
	}
	// A source's name is what `idemctl horizon` commands take: never cut.
	// Its column is as wide as the widest name; KIND, then PROBED, then
	// DETAIL give way, named.
	const resW = 12
	kindW, probeW, detW := 8, 9, 12
	nameW := len("NAME")
	for _, s := range v.sources {
		nameW = max(nameW, lipgloss.Width(s.Name))
	}
	hidden := dropColumns(w-2-nameW-1-resW, []column{{"kind", &kindW}, {"probed", &probeW}, {"detail", &detW}})
	if detW > 0 {
		detW = w - 2 - nameW - resW - 1 - optWidth(kindW) - optWidth(probeW) - 1
	}
	lines := []string{title, st.Label.Render("Sources") + hiddenNote(st.Warning, hidden) +
		st.Muted.Render(" (an unprobed or unreachable source proves nothing)")}
	lines = append(lines, st.Column.Render("  "+view.Pad("NAME", nameW)+optCell("KIND", kindW)+optCell("PROBED", probeW)+" "+
		view.Pad("RESULT", resW)+optCell("DETAIL", detW)))
	if v.list.Loaded && len(v.sources) == 0 {
		lines = append(lines, st.Warning.Render("  no replay source is registered: nothing can be proven"))
	}
	srows := v.sourceRows()
	for i, s := range v.sources {
		if i == srows-1 && len(v.sources) > srows {
			lines = append(lines, st.Muted.Render(fmt.Sprintf("  … and %d more", len(v.sources)-i)))
			break
		}
		mark, style := "! ", st.Error
		if s.Proven {
			mark, style = "  ", st.Success
		}
		probed := "never"
		if !s.ProbedAt.IsZero() {
			probed = view.Ago(now, s.ProbedAt)
		}
		lines = append(lines, mark+view.Pad(s.Name, nameW)+optCell(s.Kind, kindW)+optCell(probed, probeW)+" "+
			style.Render(view.Pad(view.OrDash(s.Result), resW))+optCell(s.Detail, detW))
	}
	const stateW = 9
	ids := make([]int64, len(v.plans))
	for i, p := range v.plans {
		ids[i] = p.ID
	}
	idW := view.IDWidth(ids...)
	// SCOPE is what the plan covers, whole. PLANNED and APPROVED show the
	// person and the login; when the row cannot hold them they go (the
	// footer names both for the selected plan), then IDENTITIES and BEFORE
	// (the footer has the horizon), named.
	scopeW, byW := len("SCOPE"), len("APPROVED")
	for _, p := range v.plans {
		scopeW = max(scopeW, lipgloss.Width(p.Scope))
		byW = max(byW, lipgloss.Width(p.PlannedBy.String()), lipgloss.Width(p.ApprovedBy.String()))
	}
	beforeW, countW, byW2 := 17, 10, 2*byW+1
	phidden := dropColumns(w-2-idW-1-scopeW-1-stateW, []column{{"planned, approved (below)", &byW2}, {"identities", &countW}, {"before", &beforeW}})
	if byW2 == 0 {
		byW = 0
	}
	scopeW = w - 2 - idW - 1 - stateW - optWidth(beforeW) - optWidth(countW) - 2*optWidth(byW) - 1
	lines = append(lines, "", st.Label.Render("Plans")+hiddenNote(st.Warning, phidden))
	lines = append(lines, st.Column.Render("  "+view.PadLeft("ID", idW)+" "+view.Pad("SCOPE", scopeW)+optCell("BEFORE", beforeW)+" "+
		view.Pad("STATE", stateW)+optCellLeft("IDENTITIES", countW)+optCell("PLANNED", byW)+optCell("APPROVED", byW)))
	if v.list.Loaded && len(v.plans) == 0 {
		lines = append(lines, st.Muted.Render("  no purge plan (idemctl horizon plan creates one)"))
	}
	prows := v.planRows()
	lines = append(lines, v.nav.Rows(len(v.plans), prows, st.Selected, func(i int, marker string) string {
		p := v.plans[i]
		st8 := p.State
		if v.purging() && p.ID == v.purgeID {
			st8 = PlanPurging // the list was loaded before the purge began
		}
		state := view.Pad(string(st8), stateW)
		if i != v.nav.Cursor {
			state = v.planStyle(st8).Render(state)
		}
		return marker + view.PadLeft("#"+strconv.FormatInt(p.ID, 10), idW) + " " + view.Pad(p.Scope, scopeW) + optCell(p.Before.UTC().Format("2006-01-02 15:04Z"), beforeW) + " " +
			state + optCellLeft(strconv.FormatInt(p.Identities, 10), countW) + optCell(p.PlannedBy.String(), byW) + optCell(p.ApprovedBy.String(), byW)
	})...)
	footer := v.footer(w)
	lines = view.FitSlice(lines, h-len(footer))
	lines = append(lines, footer...)
	return view.FitLines(lines, w, h)
}

// column is a table column that may give way: its name and its width (0
// once hidden).
type column struct {
	name  string
	width *int
}

// dropColumns hides cols, in order, until the shown ones (each with its
// separator) fit in room, and returns the names of the hidden ones.
func dropColumns(room int, cols []column) []string {
	var hidden []string
	for _, c := range cols {
		need := 0
		for _, c := range cols {
			need += optWidth(*c.width)
		}
		if need <= room {
			break
		}
		*c.width = 0
		hidden = append(hidden, c.name)
	}
	return hidden
}

// optWidth is a column's width with its separator, 0 when hidden.
func optWidth(w int) int {
	if w == 0 {
		return 0
	}
	return w + 1
}

// optCell is a column's separator and s padded to w, or nothing when the
// column is hidden (w 0); optCellLeft pads on the left.
func optCell(s string, w int) string {
	if w == 0 {
		return ""
	}
	return " " + view.Pad(s, w)
}

func optCellLeft(s string, w int) string {
	if w == 0 {
		return ""
	}
	return " " + view.PadLeft(s, w)
}

// hiddenNote names the columns a wider terminal shows.
func hiddenNote(style lipgloss.Style, hidden []string) string {
	if len(hidden) == 0 {
		return ""
	}
	return "  " + style.Render("hidden: "+strings.Join(hidden, ", "))
}

// footer is the selected plan's detail, or the purge's progress.
func (v *View) footer(w int) []string {
	st := v.c.Styles
	p := v.selected()
	var bar string
	if v.purging() || (p != nil && p.ID == v.purgeID) {
		total := max(v.purgeTotal, 1)
		pct := float64(v.purgeDone) / float64(total)
		v.bar.Width = max(10, w-30)
		label := fmt.Sprintf("purge #%d ", v.purgeID)
		if v.purging() {
			label = st.StepRunning.Render(label)
		}
		bar = label + v.bar.ViewAs(min(1, pct)) + fmt.Sprintf(" %d/%d", v.purgeDone, v.purgeTotal)
		if v.purging() || p == nil {
			return []string{"", bar, "", ""}
		}
	}
	if p == nil {
		return []string{"", "", "", ""}
	}
	l1 := st.Label.Render(fmt.Sprintf("plan #%d ", p.ID)) + "purges identities older than " + view.Stamp(p.Before)
	if p.Contract != "" {
		l1 += st.Label.Render("  contract ") + p.Contract
	}
	if p.HeldBack != "" {
		// Who holds a purge back, on the plan's first line: the quarantine
		// records keep their evidence, a source can still replay.
		l1 += st.Label.Render("  held back ") + p.HeldBack
	}
	// Who planned, approved and ran it: persons with their logins, one
	// line for the planner and one for the rest, so that none is cut.
	l2 := st.Label.Render("planned ") + p.PlannedBy.String() + " " + view.Stamp(p.PlannedAt)
	l3 := ""
	if !p.ApprovedBy.zero() {
		l3 = st.Label.Render("approved ") + p.ApprovedBy.String()
	}
	if !p.RanBy.zero() {
		l3 += st.Label.Render("  ran ") + p.RanBy.String()
	}
	l4 := ""
	switch {
	case p.State == PlanAborted && p.AbortReason != "":
		l4 = st.Warning.Render("aborted: " + p.AbortReason)
	case p.State == PlanPlanned:
		l4 = st.Muted.Render("needs the approval of a person other than its planner, " + p.PlannedBy.String())
	case p.State == PlanDone || p.State == PlanPurging:
		l4 = fmt.Sprintf("purged %d of %d", p.Purged, p.Identities)
	}
	if bar != "" {
		// The purge just ran: its bar, then where the plan ended.
		return append([]string{view.Trunc(bar, w)}, view.WrapAll([]string{l1, l3, l4}, w)...)
	}
	// Wrapped, not cut: a contract reference and the logins stay whole (the
	// plan list gives up the rows the footer takes beyond its four).
	return view.WrapAll([]string{l1, l2, l3, l4}, w)
}

func (v *View) renderConfirm(w, h int) string {
	st := v.c.Styles
	p := v.selected()
	if p == nil {
		return ""
	}
	var lines []string
	row := func(k, val string) { lines = append(lines, st.Label.Render("  "+view.Pad(k, 12))+val) }
	if v.confirm == horizonApprove {
		lines = append(lines, st.Warning.Render(fmt.Sprintf("Confirm: approve purge plan #%d", p.ID)), "")
	} else {
		lines = append(lines, st.Warning.Render(fmt.Sprintf("Confirm: PURGE plan #%d now", p.ID)), "")
	}
	row("scope", p.Scope)
	row("before", view.Stamp(p.Before))
	row("identities", strconv.FormatInt(p.Identities, 10))
	row("planned by", p.PlannedBy.String())
	if !p.ApprovedBy.zero() {
		row("approved by", p.ApprovedBy.String())
	}
	if !p.RanBy.zero() {
		row("ran by", p.RanBy.String())
	}
	row("contract", view.OrDash(p.Contract))
	row("held back", view.OrDash(p.HeldBack))
	for i, line := range p.Proof {
		k := ""
		if i == 0 {
			k = "proof"
		}
		row(k, line)
	}
	if len(p.Proof) == 0 {
		row("proof", "-")
	}
	if v.c.Who != "" {
		row("decided by", v.c.Who) // the person four eyes compare, not the label
	}
	row("operator", v.c.Operator)
	lines = append(lines, "")
	if v.confirm == horizonApprove {
		lines = append(lines, "Four eyes: the operator who planned it cannot approve it.")
	} else {
		lines = append(lines, "The purge deletes the inbox rows the plan covers. It stops by itself if the",
			"replay horizon moved (a source can again replay operations from before it).")
	}
	lines = append(lines, "", st.Focused.Render("y")+" confirm   "+st.Focused.Render("n/esc")+" cancel")
	return view.FitLines(view.WrapAll(lines, w), w, h)
}
