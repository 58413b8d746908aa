package resolveview

import (
	"fmt"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/idemctl/idemctl/recovery"
	"github.com/idemctl/idemctl/tui/view"
)

func (v *View) scrollKey(msg tea.KeyMsg) tea.Cmd {
	if v.run == nil {
		return nil
	}
	k := v.c.Keys.Queue.List
	v.top, _ = view.Scroll(k, msg, v.top, len(v.runLines(v.c.Width)), v.c.BodyHeight())
	return nil
}

func (v *View) stepMarker(s stepState) string {
	st := v.c.Styles
	switch s {
	case stepRunning:
		return st.StepRunning.Render("[..]")
	case stepOK:
		return st.StepOK.Render("[ok]")
	case stepFailed:
		return st.StepFailed.Render("[xx]")
	case stepSkipped:
		return st.StepSkipped.Render("[--]")
	case stepFlagged:
		return st.StepFailed.Render("[!!]")
	}
	return st.StepPending.Render("[  ]")
}

func (v *View) runLines(w int) []string {
	st := v.c.Styles
	r := v.run
	mode := st.Success.Render("DRY RUN")
	if !r.in.DryRun {
		mode = st.Warning.Render("REAL RUN")
	}
	lines := []string{st.Title.Render("Resolve "+r.p.TenantID+"/"+r.p.OperationID) + " " + st.Muted.Render("("+r.p.Class+")") + "  " + mode}
	lines = append(lines, view.Labelled("incoming hash", st.Label, st.HashIncoming.Render(r.p.Hash), w, 5)...)
	lines = append(lines, "")
	const titleW = 17
	for i, s := range r.steps {
		style := st.Label
		if s.state == stepRunning {
			style = st.StepRunning
		}
		head := v.stepMarker(s.state) + " " + style.Render(view.Pad(fmt.Sprintf("%d %s", i+1, stepNames[i]), titleW))
		rest := s.lines
		if len(rest) > 0 && rest[0].label == "" && 4+1+titleW+1+lipgloss.Width(rest[0].text) <= w {
			head += " " + v.stepText(rest[0])
			rest = rest[1:]
		}
		lines = append(lines, head)
		for _, l := range rest {
			if l.label != "" {
				lines = append(lines, view.Indent("     ", view.Labelled(l.label, st.Label, st.HashStored.Render(l.text), w-5, 0))...)
				continue
			}
			lines = append(lines, view.Indent("     ", view.Wrap(v.stepText(l), max(10, w-5)))...)
		}
	}
	if !r.done {
		return lines
	}
	lines = append(lines, "", st.Label.Render("outcome ")+v.outcomeStyle(r.outcome).Render(string(r.outcome)))
	for _, l := range r.summary {
		lines = append(lines, view.Wrap(l, w)...)
	}
	if r.result != nil && (r.result.Outcome == recovery.Applied || r.result.Outcome == recovery.AlreadyApplied) {
		lines = append(lines, view.Indent("  ", view.Wrap(view.PrettyJSON(r.result.Response), max(10, w-2)))...)
	}
	if r.note != "" {
		lines = append(lines, view.Wrap(st.Warning.Render(r.note), w)...)
	}
	return lines
}

func (v *View) stepText(l stepLine) string {
	if l.alert {
		return v.c.Styles.DiffIncoming.Render(l.text)
	}
	return l.text
}

func (v *View) outcomeStyle(o recovery.Outcome) lipgloss.Style {
	st := v.c.Styles
	switch o {
	case recovery.Applied, recovery.AlreadyApplied, recovery.WouldApply:
		return st.StepOK
	case recovery.Conflict, recovery.WouldConflict:
		return st.Open
	}
	return st.StepFailed
}
