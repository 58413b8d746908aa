package reconcileview

import (
	"fmt"
	"strconv"

	"github.com/charmbracelet/lipgloss"

	"github.com/idemctl/idemctl/reconcile"
	"github.com/idemctl/idemctl/tui/view"
)

// renderResults draws a run: the report, the counts and amounts per status,
// and the findings that are not matched.
func (v *View) renderResults(w, h int) string {
	st := v.c.Styles
	lines := append(v.headLines(w), st.Column.Render("  "+view.Pad("STATUS", 18)+" "+view.PadLeft("COUNT", 9)+"  AMOUNTS (inbox/report)"))
	lines = append(lines, v.summaryRows()...)
	shown := fmt.Sprintf("%d", len(v.run.Findings))
	if v.run.More > 0 {
		shown = fmt.Sprintf("first %d of %d", len(v.run.Findings), int64(len(v.run.Findings))+v.run.More)
	}
	lines = append(lines, "", st.Label.Render("Discrepancies and invalid lines")+st.Muted.Render(" ("+shown+")"))
	// The identity an operator types next is never cut: its column is as
	// wide as the widest shown; DETAIL (whole when the finding opens) gives way.
	const lineW, statusW = 6, 17
	idW := len("IDENTITY")
	for _, f := range v.run.Findings {
		idW = max(idW, lipgloss.Width(identityText(f)))
	}
	detailW := max(8, w-2-lineW-statusW-idW-3)
	lines = append(lines, st.Column.Render("  "+view.PadLeft("LINE", lineW)+" "+view.Pad("STATUS", statusW)+" "+view.Pad("IDENTITY", idW)+" "+view.Pad("DETAIL", detailW)))
	if len(v.run.Findings) == 0 {
		lines = append(lines, st.Success.Render("  none: every line matched"))
	}
	rows := v.findingRows()
	lines = append(lines, v.fnav.Rows(len(v.run.Findings), rows, st.Selected, func(i int, marker string) string {
		f := v.run.Findings[i]
		status := view.Pad(string(f.Status), statusW)
		if _, ok := v.pinned[i]; ok {
			status = view.Pad(string(f.Status)+" ⚑", statusW)
		}
		row := marker + view.PadLeft(lineText(f.Line), lineW) + " " + status + " " + view.Pad(identityText(f), idW) + " " + view.Pad(f.Detail(), detailW)
		if f.Status == reconcile.Invalid && i != v.fnav.Cursor {
			row = st.Muted.Render(row)
		}
		return row
	})...)
	return view.FitLines(lines, w, h)
}

// headLines names the run, its report and its class, and the report's hash
// with its algorithm: what the audit row's target and a pin's reason cite, so
// it is never cut (it goes whole on a line of its own, as do the report's
// name and the class when the title line cannot hold them).
func (v *View) headLines(w int) []string {
	st := v.c.Styles
	s := v.run.Summary
	title := "Reconcile " + v.run.Name
	info := fmt.Sprintf("%s · %d lines · class %s", s.Report.Name, s.Report.Lines, s.Class)
	lines := []string{st.Title.Render(title) + st.Muted.Render("  "+info)}
	if lipgloss.Width(title)+2+lipgloss.Width(info) > w {
		lines = []string{st.Title.Render(title)}
		for _, l := range view.Wrap(info, w) {
			lines = append(lines, st.Muted.Render(l))
		}
	}
	return append(lines, view.Labelled("report", st.Label, "sha256:"+s.Report.SHA256, w, 2)...)
}

func lineText(n int64) string {
	if n == 0 {
		return "-"
	}
	return strconv.FormatInt(n, 10)
}

func identityText(f reconcile.Finding) string {
	if f.Tenant == "" && f.OperationID == "" {
		return "-"
	}
	return f.Tenant + "/" + f.OperationID
}

// renderFinding draws one finding whole.
func (v *View) renderFinding(w, h int) string {
	st := v.c.Styles
	f := v.selected()
	row := func(k, val string) string { return st.Label.Render(view.Pad(k, 11)) + " " + val }
	where := "not in the report"
	if f.Line > 0 {
		where = fmt.Sprintf("line %d of %s", f.Line, v.run.Summary.Report.Name)
	}
	lines := []string{st.Title.Render("Finding: "+string(f.Status)) + st.Muted.Render("  "+where), ""}
	lines = append(lines, row("tenant", view.OrDash(f.Tenant)), row("operation", view.OrDash(f.OperationID)), row("class", view.OrDash(f.Class)))
	if f.CreatedAt != nil {
		lines = append(lines, row("recorded", view.Stamp(*f.CreatedAt)))
	}
	if f.Amount != "" {
		lines = append(lines, row("amount", f.Amount+" "+f.Currency))
	}
	if len(f.Differences) > 0 {
		lines = append(lines, "", st.Label.Render("Differences")+st.Muted.Render(" (JSON Pointer: inbox → report)"))
		for _, d := range f.Differences {
			name, inbox := d.Pointer, "absent"
			if d.Field != "" {
				name = d.Field
			}
			if d.Inbox != nil {
				inbox = *d.Inbox
			}
			lines = append(lines, "  "+st.DiffPath.Render(view.Pad(name, 14))+" "+st.DiffStored.Render(inbox)+" → "+st.DiffIncoming.Render(d.Report))
		}
	}
	if f.Reason != "" {
		lines = append(lines, "", st.Warning.Render("invalid: ")+f.Reason)
	}
	if f.Note != "" {
		lines = append(lines, "", st.Muted.Render(f.Note))
	}
	lines = append(lines, "")
	switch id, ok := v.pinned[v.fnav.Cursor]; {
	case ok:
		lines = append(lines, st.Success.Render(fmt.Sprintf("pinned as correction #%d", id)))
	case f.Status.Discrepancy():
		lines = append(lines, st.Muted.Render("p pins it: a pending manual correction that keeps any purge from removing its evidence"))
	}
	return view.FitLines(view.WrapAll(lines, w), w, h)
}

// renderConfirm asks before a pin, showing the reason it will record.
func (v *View) renderConfirm(w, h int) string {
	st := v.c.Styles
	f := v.selected()
	if f == nil {
		return ""
	}
	lines := []string{st.Warning.Render("Confirm: pin " + identityText(*f) + " as a pending manual correction"), "",
		st.Label.Render("reason  ") + reconcile.PinReason(*f, v.run.Summary.Report),
		st.Label.Render("by      ") + v.c.Decider(), st.Label.Render("label   ") + v.c.Operator, "",
		"While it is pending, no purge removes this identity's evidence (the manual",
		"replay source pins it). Mark it done with idemctl corrections done ID.", "",
		st.Focused.Render("y") + " confirm   " + st.Focused.Render("n/esc") + " cancel"}
	return view.FitLines(view.WrapAll(lines, w), w, h)
}
