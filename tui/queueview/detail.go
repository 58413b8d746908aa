package queueview

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/idemctl/idemctl/audit"
	"github.com/idemctl/idemctl/quarantine"
	"github.com/idemctl/idemctl/tui/view"
)

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

func (v *View) detailHeight() int { return max(1, v.c.BodyHeight()-1) }

func (v *View) detailKey(msg tea.KeyMsg) tea.Cmd {
	k := v.c.Keys.Queue
	total := len(v.detailLines(v.c.Width))
	h := v.detailHeight()
	if top, ok := view.Scroll(k.List, msg, v.dtop, total, h); ok {
		v.dtop = top
		return nil
	}
	switch {
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

	status := v.statusStyle(r.Status).Render(strings.ToUpper(string(r.Status)))
	if first := fmt.Sprintf("#%d  %s/%s", r.ID, r.Tenant, r.OperationID); lipgloss.Width(first)+2+len(r.Status) <= w {
		add(st.Title.Render(first) + "  " + status)
	} else {
		// Too wide for the line: the identity, never cut, on lines of its own.
		add(st.Title.Render(fmt.Sprintf("#%d", r.ID)) + "  " + status)
		for _, l := range identityLines(r.Tenant, r.OperationID, w-2) {
			add("  " + st.Title.Render(l))
		}
	}
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
	} else if r.Entered != nil {
		add("  " + st.Open.Render("waiting for a decision") + st.Muted.Render("  x reject (it is done: it never runs as new)"))
	} else {
		add("  " + st.Open.Render("waiting for a decision") + st.Muted.Render("  x reject · a accept as new"))
	}
	add("")

	block := func(title string, raw []byte) {
		add(st.Title.Render(title))
		add(view.Indent("  ", view.Wrap(view.PrettyJSON(raw), max(10, w-2)))...)
	}
	if im := r.Entered; im != nil {
		add(st.Title.Render("Its answer") + st.Muted.Render(" (the incoming operation is done)"))
		for _, l := range view.Wrap(im.How()+": accept-as-new is refused", max(10, w-2)) {
			add("  " + st.Muted.Render(l))
		}
		add(view.Indent("  ", view.Wrap(view.PrettyJSON(im.OldStoreResponse), max(10, w-2)))...)
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
