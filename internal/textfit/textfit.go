// Package textfit fits text meant for people to a terminal's width: help
// text, examples that must still paste, one-line messages. A word (a name,
// an id, a flag, a path) is never cut.
package textfit

import (
	"regexp"
	"strings"

	"github.com/charmbracelet/x/ansi"
)

// HangingIndent returns prefix followed by text wrapped at width, its further
// lines indented under the text's first word.
func HangingIndent(prefix, text string, width int) string {
	indent := strings.Repeat(" ", len(prefix))
	room := width - len(prefix)
	if room < 20 {
		room = 20
	}
	return prefix + strings.Join(Whole(text, room), "\n"+indent)
}

// Sentence fits a one-line message to width: wrapped at spaces, its further
// lines indented two; a word (a name, an id, a URL) is never cut. A message
// that fits is left as it is.
func Sentence(text string, width int) string {
	lines := Whole(text, width)
	if len(lines) == 1 {
		return lines[0]
	}
	rest := Whole(strings.Join(lines[1:], " "), width-2)
	return lines[0] + "\n  " + strings.Join(rest, "\n  ")
}

// Whole wraps text at spaces into lines of at most width cells; a word
// wider than that stays whole on a line of its own (an identifier, a flag or
// a path is never cut).
func Whole(text string, width int) []string {
	var out []string
	line := ""
	for _, word := range strings.Fields(text) {
		switch {
		case line == "":
			line = word
		case ansi.StringWidth(line)+1+ansi.StringWidth(word) <= width:
			line += " " + word
		default:
			out = append(out, line)
			line = word
		}
	}
	return append(out, line)
}

// listMarker matches what a line of help text hangs its continuation under:
// a column gap ("  key   text"), an arrow, a bullet or a number.
var listMarker = regexp.MustCompile(`^(\s*)(\S.*?\s{2,}|-> |- |\* |\d+\. )`)

// Text fits hand-written help text (a long description, a flag's
// usage) to width: a line wider than width is wrapped at spaces, its further
// lines indented under its text (after a column gap, an arrow, a bullet or
// a number), so lists and tables keep their shape. When the next line goes
// on with the same paragraph (indented as the continuation, not an item of
// its own), the words that did not fit move to its start and it is fitted in
// turn, so a paragraph is reflowed instead of leaving a word on a line of its
// own. Lines that fit are left as written.
func Text(text string, width int) string {
	in := strings.Split(text, "\n")
	out := make([]string, 0, len(in))
	carry := ""
	for i, l := range in {
		if carry != "" {
			body := strings.TrimLeft(l, " ")
			l = l[:len(l)-len(body)] + carry + " " + body
			carry = ""
		}
		if ansi.StringWidth(l) <= width {
			out = append(out, l)
			continue
		}
		prefix := l[:len(l)-len(strings.TrimLeft(l, " "))]
		if m := listMarker.FindString(l); m != "" && len(m) <= width/2 {
			prefix = m
		}
		room := max(width-len(prefix), 20)
		wrapped := Whole(strings.TrimPrefix(l, prefix), room)
		cont := strings.Repeat(" ", len(prefix))
		if len(wrapped) > 1 && i+1 < len(in) && continuesParagraph(in[i+1], cont) {
			out = append(out, prefix+wrapped[0])
			carry = strings.Join(wrapped[1:], " ")
			continue
		}
		out = append(out, prefix+strings.Join(wrapped, "\n"+cont))
	}
	return strings.Join(out, "\n")
}

// continuesParagraph says whether line goes on with the text of the line
// before, whose continuation indent is cont: it is indented exactly so and
// starts no list item, column or table row of its own.
func continuesParagraph(line, cont string) bool {
	body := strings.TrimLeft(line, " ")
	if body == "" || len(line)-len(body) != len(cont) {
		return false
	}
	return listMarker.FindString(line) == ""
}

// Example fits an Example block to width so that every line can still be
// pasted: a command wider than width is continued with " \" at a space
// outside quotes (a flag kept with its value), its further lines indented
// four more; a comment is continued as a comment.
func Example(text string, width int) string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if ansi.StringWidth(l) <= width {
			continue
		}
		indent := l[:len(l)-len(strings.TrimLeft(l, " "))]
		body := strings.TrimPrefix(l, indent)
		if strings.HasPrefix(body, "#") {
			room := max(width-len(indent)-2, 20)
			lines[i] = indent + "# " + strings.Join(Whole(strings.TrimPrefix(body, "#"), room), "\n"+indent+"# ")
			continue
		}
		lines[i] = fitCommand(indent, body, width)
	}
	return strings.Join(lines, "\n")
}

// fitCommand breaks one shell command line into continued lines.
func fitCommand(indent, cmd string, width int) string {
	units := commandUnits(cmd)
	more := indent + "    "
	var out []string
	line := indent
	for _, u := range units {
		switch {
		case strings.TrimSpace(line) == "":
			line += u
		case ansi.StringWidth(line)+1+ansi.StringWidth(u)+2 <= width || u == "\\":
			line += " " + u
		default:
			out = append(out, line+" \\")
			line = more + u
		}
	}
	return strings.Join(append(out, line), "\n")
}

// commandUnits splits a command line at spaces outside quotes, and keeps a
// flag with the value that follows it.
func commandUnits(cmd string) []string {
	var words []string
	var cur strings.Builder
	var quote rune
	for _, r := range cmd {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == ' ':
			if cur.Len() > 0 {
				words = append(words, cur.String())
				cur.Reset()
			}
			continue
		}
		cur.WriteRune(r)
	}
	if cur.Len() > 0 {
		words = append(words, cur.String())
	}
	var units []string
	for i := 0; i < len(words); i++ {
		w := words[i]
		if strings.HasPrefix(w, "-") && !strings.Contains(w, "=") && i+1 < len(words) &&
			!strings.HasPrefix(words[i+1], "-") && words[i+1] != "|" && words[i+1] != "\\" {
			w += " " + words[i+1]
			i++
		}
		units = append(units, w)
	}
	return units
}
