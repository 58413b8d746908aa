package tui

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/idemctl/idemctl/tui/keys"
)

func sprintf(format string, args ...any) string {
	if len(args) == 0 {
		return format
	}
	return fmt.Sprintf(format, args...)
}

// oneLine folds whitespace (a database error can span lines).
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// trunc shortens s to at most w cells, ending with "…" when cut.
func trunc(s string, w int) string {
	if w <= 0 {
		return ""
	}
	return ansi.Truncate(s, w, "…")
}

// pad truncates or right-pads s to exactly w cells.
func pad(s string, w int) string {
	s = trunc(s, w)
	if n := lipgloss.Width(s); n < w {
		s += strings.Repeat(" ", w-n)
	}
	return s
}

// padLeft truncates or left-pads s to exactly w cells.
// idWidth is the width of an ID column ("#" and the digits) that has room for
// the widest of ids, at least 6: ids minted on Citus workers start at 2^48
// (15 digits), a single node's are short.
func idWidth(ids ...int64) int {
	w := 6
	for _, id := range ids {
		w = max(w, 1+len(strconv.FormatInt(id, 10)))
	}
	return w
}

func padLeft(s string, w int) string {
	s = trunc(s, w)
	if n := lipgloss.Width(s); n < w {
		s = strings.Repeat(" ", w-n) + s
	}
	return s
}

// wrap breaks s into lines of at most w cells: at spaces, and inside a word
// only when the word alone is wider than w (a hash, a long JSON value).
// Hyphens never break a line: a date or a hash stays whole.
func wrap(s string, w int) []string {
	if w <= 0 {
		return []string{s}
	}
	var out []string
	for _, para := range strings.Split(s, "\n") {
		if ansi.StringWidth(para) <= w {
			out = append(out, para)
			continue
		}
		// Keep the paragraph's indentation on every line it wraps to.
		body := strings.TrimLeft(para, " ")
		lead := para[:len(para)-len(body)]
		if len(lead) > 0 && len(lead) < w/2 {
			out = append(out, indent(lead, wrap(body, w-len(lead)))...)
			continue
		}
		line, lineW := "", 0
		flush := func() {
			out = append(out, line)
			line, lineW = "", 0
		}
		for i, word := range strings.Split(para, " ") {
			ww := ansi.StringWidth(word)
			sep := 0
			if i > 0 && lineW > 0 {
				sep = 1
			}
			switch {
			case lineW+sep+ww <= w:
				if sep == 1 {
					line += " "
				}
				line += word
				lineW += sep + ww
			case ww <= w:
				flush()
				line, lineW = word, ww
			default:
				if lineW > 0 {
					flush()
				}
				parts := strings.Split(ansi.Hardwrap(word, w, false), "\n")
				out = append(out, parts[:len(parts)-1]...)
				line = parts[len(parts)-1]
				lineW = ansi.StringWidth(line)
			}
		}
		if lineW > 0 || line != "" {
			flush()
		}
	}
	return out
}

// labelled renders "label value" on one line when it fits in w, else the
// label on one line and the value, indented, below (a 75-character hash fits
// an 80-column terminal that way). The label is styled here so that its
// padding can be dropped when it stands alone.
func labelled(label string, style lipgloss.Style, value string, w, indentW int) []string {
	if ansi.StringWidth(label)+1+ansi.StringWidth(value) <= w {
		return []string{style.Render(label) + " " + value}
	}
	return append([]string{style.Render(strings.TrimRight(label, " "))},
		indent(strings.Repeat(" ", indentW), wrap(value, max(10, w-indentW)))...)
}

// truncMiddle shortens s to w cells by cutting its middle, so that both ends
// (a database's user and its name) stay readable.
func truncMiddle(s string, w int) string {
	if ansi.StringWidth(s) <= w || w < 5 {
		return trunc(s, w)
	}
	head := (w - 1) / 2
	tail := w - 1 - head
	return ansi.Truncate(s, head, "") + "…" + ansi.TruncateLeft(s, ansi.StringWidth(s)-tail, "")
}

// indent prefixes every line of lines.
func indent(prefix string, lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = prefix + l
	}
	return out
}

// fitLines cuts or pads lines to exactly h lines of at most w cells.
func fitLines(lines []string, w, h int) string {
	if h < 0 {
		h = 0
	}
	if len(lines) > h {
		lines = lines[:h]
	}
	out := make([]string, 0, h)
	for _, l := range lines {
		out = append(out, trunc(l, w))
	}
	for len(out) < h {
		out = append(out, "")
	}
	return strings.Join(out, "\n")
}

// scrollWindow returns the first visible row so that cursor stays within a
// window of h rows over n rows, moving the window as little as possible.
func scrollWindow(top, cursor, n, h int) int {
	if h <= 0 || n <= h {
		return 0
	}
	if cursor < top {
		top = cursor
	}
	if cursor >= top+h {
		top = cursor - h + 1
	}
	return max(0, min(top, n-h))
}

// stamp renders a time for evidence: UTC, to the second.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// ago renders how long before now t was, coarsely ("12s", "5m", "3h", "4d").
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < 0:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

// listNav is a cursor over a list and the first visible row.
type listNav struct {
	cursor, top int
}

// handle moves the cursor for a list key over n rows shown h at a time and
// reports whether the key was a list key.
func (l *listNav) handle(k keys.List, msg tea.KeyMsg, n, h int) bool {
	delta := 0
	switch {
	case key.Matches(msg, k.Up):
		delta = -1
	case key.Matches(msg, k.Down):
		delta = 1
	case key.Matches(msg, k.PageUp):
		delta = -max(1, h)
	case key.Matches(msg, k.PageDown):
		delta = max(1, h)
	case key.Matches(msg, k.Top):
		delta = -n
	case key.Matches(msg, k.Bottom):
		delta = n
	default:
		return false
	}
	l.cursor = max(0, min(n-1, l.cursor+delta))
	l.top = scrollWindow(l.top, l.cursor, n, h)
	return true
}

// clamp keeps the cursor on one of n rows after the list changed.
func (l *listNav) clamp(n, h int) {
	l.cursor = max(0, min(n-1, l.cursor))
	l.top = scrollWindow(l.top, l.cursor, n, h)
}
