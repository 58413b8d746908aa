package view

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

// Sprintf is fmt.Sprintf, except that a format without arguments is the
// text itself (a reason holding a %% stays as typed).
func Sprintf(format string, args ...any) string {
	if len(args) == 0 {
		return format
	}
	return fmt.Sprintf(format, args...)
}

// OneLine folds whitespace (a database error can span lines).
func OneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// Trunc shortens s to at most w cells, ending with "…" when cut.
func Trunc(s string, w int) string {
	if w <= 0 {
		return ""
	}
	return ansi.Truncate(s, w, "…")
}

// Pad truncates or right-pads s to exactly w cells.
func Pad(s string, w int) string {
	s = Trunc(s, w)
	if n := lipgloss.Width(s); n < w {
		s += strings.Repeat(" ", w-n)
	}
	return s
}

// IDWidth is the width of an ID column ("#" and the digits) that has room for
// the widest of ids, at least 6: ids minted on Citus workers start at 2^48
// (15 digits), a single node's are short.
func IDWidth(ids ...int64) int {
	w := 6
	for _, id := range ids {
		w = max(w, 1+len(strconv.FormatInt(id, 10)))
	}
	return w
}

// PadLeft truncates or left-pads s to exactly w cells.
func PadLeft(s string, w int) string {
	s = Trunc(s, w)
	if n := lipgloss.Width(s); n < w {
		s = strings.Repeat(" ", w-n) + s
	}
	return s
}

// Wrap breaks s into lines of at most w cells: at spaces, and inside a word
// only when the word alone is wider than w (a hash, a long JSON value).
// Hyphens never break a line: a date or a hash stays whole.
func Wrap(s string, w int) []string {
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
			out = append(out, Indent(lead, Wrap(body, w-len(lead)))...)
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

// Labelled renders "label value" on one line when it fits in w, else the
// label on one line and the value, indented, below (a 75-character hash fits
// an 80-column terminal that way). The label is styled here so that its
// padding can be dropped when it stands alone.
func Labelled(label string, style lipgloss.Style, value string, w, indentW int) []string {
	if ansi.StringWidth(label)+1+ansi.StringWidth(value) <= w {
		return []string{style.Render(label) + " " + value}
	}
	return append([]string{style.Render(strings.TrimRight(label, " "))},
		Indent(strings.Repeat(" ", indentW), Wrap(value, max(10, w-indentW)))...)
}

// TruncMiddle shortens s to w cells by cutting its middle, so that both ends
// (a database's user and its name) stay readable.
func TruncMiddle(s string, w int) string {
	if ansi.StringWidth(s) <= w || w < 5 {
		return Trunc(s, w)
	}
	head := (w - 1) / 2
	tail := w - 1 - head
	return ansi.Truncate(s, head, "") + "…" + ansi.TruncateLeft(s, ansi.StringWidth(s)-tail, "")
}

// Indent prefixes every line of lines.
func Indent(prefix string, lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = prefix + l
	}
	return out
}

// FitLines cuts or pads lines to exactly h lines of at most w cells.
func FitLines(lines []string, w, h int) string {
	if h < 0 {
		h = 0
	}
	if len(lines) > h {
		lines = lines[:h]
	}
	out := make([]string, 0, h)
	for _, l := range lines {
		out = append(out, Trunc(l, w))
	}
	for len(out) < h {
		out = append(out, "")
	}
	return strings.Join(out, "\n")
}

// ScrollWindow returns the first visible row so that cursor stays within a
// window of h rows over n rows, moving the window as little as possible.
func ScrollWindow(top, cursor, n, h int) int {
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

// Stamp renders a time for evidence: UTC, to the second.
func Stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// Ago renders how long before now t was, coarsely ("12s", "5m", "3h", "4d").
func Ago(now, t time.Time) string {
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

// ListNav is a cursor over a list and the first visible row.
type ListNav struct {
	Cursor, Top int
}

// Handle moves the cursor for a list key over n rows shown h at a time and
// reports whether the key was a list key.
func (l *ListNav) Handle(k keys.List, msg tea.KeyMsg, n, h int) bool {
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
	l.Cursor = max(0, min(n-1, l.Cursor+delta))
	l.Top = ScrollWindow(l.Top, l.Cursor, n, h)
	return true
}

// Clamp keeps the cursor on one of n rows after the list changed.
func (l *ListNav) Clamp(n, h int) {
	l.Cursor = max(0, min(n-1, l.Cursor))
	l.Top = ScrollWindow(l.Top, l.Cursor, n, h)
}

// WrapAll wraps every line to w cells.
func WrapAll(lines []string, w int) []string {
	var out []string
	for _, l := range lines {
		out = append(out, Wrap(l, w)...)
	}
	return out
}

// FitSlice cuts or pads lines to exactly n.
func FitSlice(lines []string, n int) []string {
	if len(lines) > n {
		return lines[:n]
	}
	for len(lines) < n {
		lines = append(lines, "")
	}
	return lines
}

// Rows draws the rows of a list of n shown h at a time from l.Top: row
// draws row i after its marker ("> " on the cursor's row, "  " elsewhere),
// and the cursor's row is drawn in selected.
func (l ListNav) Rows(n, h int, selected lipgloss.Style, row func(i int, marker string) string) []string {
	var lines []string
	for i := l.Top; i < n && i < l.Top+h; i++ {
		marker := "  "
		if i == l.Cursor {
			marker = "> "
		}
		r := row(i, marker)
		if i == l.Cursor {
			r = selected.Render(r)
		}
		lines = append(lines, r)
	}
	return lines
}

// Scroll moves top, the first shown of n lines of text seen h at a time, for
// a list key, and keeps it within the text; ok is false when msg is no list
// key (top is then only kept within the text).
func Scroll(k keys.List, msg tea.KeyMsg, top, n, h int) (_ int, ok bool) {
	ok = true
	switch {
	case key.Matches(msg, k.Up):
		top--
	case key.Matches(msg, k.Down):
		top++
	case key.Matches(msg, k.PageUp):
		top -= h
	case key.Matches(msg, k.PageDown):
		top += h
	case key.Matches(msg, k.Top):
		top = 0
	case key.Matches(msg, k.Bottom):
		top = n
	default:
		ok = false
	}
	return max(0, min(top, n-h)), ok
}
