// Package horizonview is the console's purge horizon: the replay sources
// with their last probe, the purge plans, the four-eyes approval and the
// purge itself with its progress.
package horizonview

import (
	"fmt"
	"strconv"

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
	lines := []string{title, st.Label.Render("Sources") + st.Muted.Render(" (an unprobed or unreachable source proves nothing)")}
	const kindW, probeW, resW = 8, 9, 12
	nameW := max(10, min(28, (w-kindW-probeW-resW-6)/2))
	detW := max(5, w-2-nameW-kindW-probeW-resW-4)
	lines = append(lines, st.Column.Render("  "+view.Pad("NAME", nameW)+" "+view.Pad("KIND", kindW)+" "+view.Pad("PROBED", probeW)+" "+view.Pad("RESULT", resW)+" "+view.Pad("DETAIL", detW)))
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
		lines = append(lines, mark+view.Pad(s.Name, nameW)+" "+view.Pad(s.Kind, kindW)+" "+view.Pad(probed, probeW)+" "+
			style.Render(view.Pad(view.OrDash(s.Result), resW))+" "+view.Pad(s.Detail, detW))
	}
	lines = append(lines, "", st.Label.Render("Plans"))
	const stateW, countW = 9, 10
	ids := make([]int64, len(v.plans))
	for i, p := range v.plans {
		ids[i] = p.ID
	}
	idW := view.IDWidth(ids...)
	beforeW := 17
	// PLANNED and APPROVED show the person and the login when the scope
	// still fits whole beside them, else the persons (the footer and the
	// confirmation name the logins too).
	who, byW, scopeW := v.whoColumns(w - 2 - idW - beforeW - stateW - countW - 6)
	lines = append(lines, st.Column.Render("  "+view.PadLeft("ID", idW)+" "+view.Pad("SCOPE", scopeW)+" "+view.Pad("BEFORE", beforeW)+" "+
		view.Pad("STATE", stateW)+" "+view.PadLeft("IDENTITIES", countW)+" "+view.Pad("PLANNED", byW)+" "+view.Pad("APPROVED", byW)))
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
		row := marker + view.PadLeft("#"+strconv.FormatInt(p.ID, 10), idW) + " " + view.Pad(p.Scope, scopeW) + " " + view.Pad(p.Before.UTC().Format("2006-01-02 15:04Z"), beforeW) + " " +
			state + " " + view.PadLeft(strconv.FormatInt(p.Identities, 10), countW) + " " +
			view.Pad(who(p.PlannedBy), byW) + " " + view.Pad(who(p.ApprovedBy), byW)
		return row
	})...)
	lines = view.FitSlice(lines, h-4)
	lines = append(lines, v.footer(w)...)
	return view.FitLines(lines, w, h)
}

// whoColumns sizes the plan list's PLANNED and APPROVED columns in room
// (what the other columns leave): the person and the login when the widest
// scope still fits whole, else the persons alone. It returns how to show a
// Who, the columns' width and the scope's.
func (v *View) whoColumns(room int) (func(Who) string, int, int) {
	scopeNeed, full, short := len("SCOPE"), len("APPROVED"), len("APPROVED")
	for _, p := range v.plans {
		scopeNeed = max(scopeNeed, lipgloss.Width(p.Scope))
		for _, w := range []Who{p.PlannedBy, p.ApprovedBy} {
			full = max(full, lipgloss.Width(w.String()))
			short = max(short, lipgloss.Width(w.short()))
		}
	}
	if room-2*full >= scopeNeed {
		return Who.String, full, room - 2*full
	}
	return Who.short, short, max(8, room-2*short)
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
		return []string{view.Trunc(bar, w), view.Trunc(l1, w), view.Trunc(l3, w), view.Trunc(l4, w)}
	}
	return []string{view.Trunc(l1, w), view.Trunc(l2, w), view.Trunc(l3, w), view.Trunc(l4, w)}
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
