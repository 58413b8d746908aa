package cmdutil

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/charmbracelet/x/ansi"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// DefaultHelpWidth is the width --help wraps at when standard output's width
// is unknown (a pipe or a file without COLUMNS): a pager or an 80-column
// terminal reads it as well as a file does.
const DefaultHelpWidth = 80

// helpWidthKey is the root annotation that carries the width --help wraps at:
// cobra's template functions are global, so the width travels with the tree.
const helpWidthKey = "idemctl/help-width"

// TextWidth is the width --help and one-line messages wrap at on these
// streams: the terminal's (COLUMNS first), else DefaultHelpWidth.
func (s *IOStreams) TextWidth() int {
	if s.width > 0 {
		return s.width
	}
	return DefaultHelpWidth
}

// SetHelpWidth makes the --help of root and every command under it wrap its
// flag lists and exit codes at width cells.
func SetHelpWidth(root *cobra.Command, width int) {
	if root.Annotations == nil {
		root.Annotations = map[string]string{}
	}
	root.Annotations[helpWidthKey] = strconv.Itoa(width)
}

// helpWidth is the width cmd's --help wraps at (SetHelpWidth on its root).
func helpWidth(cmd *cobra.Command) int {
	if n, err := strconv.Atoi(cmd.Root().Annotations[helpWidthKey]); err == nil && n > 0 {
		return n
	}
	return DefaultHelpWidth
}

// UsageTemplate is cobra's default usage template with the flag lists
// wrapped at the help width ({{flagUsages}}) and the command lists' short
// descriptions wrapped under themselves ({{commandLine}}).
const UsageTemplate = `Usage:{{if .Runnable}}
{{useLine .}}{{end}}{{if .HasAvailableSubCommands}}
  {{.CommandPath}} [command]{{end}}{{if gt (len .Aliases) 0}}

Aliases:
  {{.NameAndAliases}}{{end}}{{if .HasExample}}

Examples:
{{fitExample .Example .}}{{end}}{{if .HasAvailableSubCommands}}{{$cmds := .Commands}}

Available Commands:{{range $cmds}}{{if (or .IsAvailableCommand (eq .Name "help"))}}
{{commandLine .}}{{end}}{{end}}{{end}}{{if .HasAvailableLocalFlags}}

Flags:
{{flagUsages .LocalFlags . | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableInheritedFlags}}

Global Flags:
{{flagUsages .InheritedFlags . | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableSubCommands}}

{{fitText (printf "Use \"%s [command] --help\" for more information about a command." .CommandPath) .}}{{end}}
`

// HelpTemplate is cobra's default help template with the long description
// fitted to the help width ({{fitText}}) and the exit codes after the usage.
const HelpTemplate = `{{with (or .Long .Short)}}{{fitText (trimTrailingWhitespaces .) $}}

{{end}}{{if or .Runnable .HasSubCommands}}{{.UsageString}}{{end}}{{exitCodes .}}`

// The usage template's functions; global in cobra, so registered once.
func init() {
	cobra.AddTemplateFunc("flagUsages", flagUsagesHelp)
	cobra.AddTemplateFunc("commandLine", commandLineHelp)
	cobra.AddTemplateFunc("useLine", useLineHelp)
	cobra.AddTemplateFunc("fitText", func(text string, cmd *cobra.Command) string { return FitText(text, helpWidth(cmd)) })
	cobra.AddTemplateFunc("fitExample", func(text string, cmd *cobra.Command) string { return FitExample(text, helpWidth(cmd)) })
}

// useLineHelp is cmd's usage line, its arguments wrapped under the first.
func useLineHelp(cmd *cobra.Command) string {
	line := cmd.UseLine()
	prefix := cmd.CommandPath() + " "
	if !strings.HasPrefix(line, prefix) {
		return "  " + line
	}
	return hangingIndent("  "+prefix, strings.TrimPrefix(line, prefix), helpWidth(cmd))
}

// flagUsagesHelp is fs's flag list wrapped at cmd's help width. pflag
// leaves a word wider than what remains of its first line whole: FitText
// then wraps that line under the usage column.
func flagUsagesHelp(fs *pflag.FlagSet, cmd *cobra.Command) string {
	return FitText(fs.FlagUsagesWrapped(helpWidth(cmd)), helpWidth(cmd))
}

// commandLineHelp is sub's line in its parent's command list: the name
// padded as cobra pads it, the short description wrapped under itself.
func commandLineHelp(sub *cobra.Command) string {
	prefix := "  " + sub.Name() + strings.Repeat(" ", max(sub.NamePadding()-len(sub.Name()), 0)) + " "
	return hangingIndent(prefix, sub.Short, helpWidth(sub))
}

// hangingIndent is prefix followed by text wrapped at width, its further
// lines indented under the text's first word.
func hangingIndent(prefix, text string, width int) string {
	indent := strings.Repeat(" ", len(prefix))
	room := width - len(prefix)
	if room < 20 {
		room = 20
	}
	return prefix + strings.Join(wrapWhole(text, room), "\n"+indent)
}

// Sentence fits a one-line message to width: wrapped at spaces, its further
// lines indented two; a word (a name, an id, a URL) is never cut. A message
// that fits is left as it is.
func Sentence(text string, width int) string {
	lines := wrapWhole(text, width)
	if len(lines) == 1 {
		return lines[0]
	}
	rest := wrapWhole(strings.Join(lines[1:], " "), width-2)
	return lines[0] + "\n  " + strings.Join(rest, "\n  ")
}

// wrapWhole wraps text at spaces into lines of at most width cells; a word
// wider than that stays whole on a line of its own (an identifier, a flag or
// a path is never cut).
func wrapWhole(text string, width int) []string {
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

// FitText fits hand-written help text (a long description, a flag's
// usage) to width: a line wider than width is wrapped at spaces, its further
// lines indented under its text (after a column gap, an arrow, a bullet or
// a number), so lists and tables keep their shape. When the next line goes
// on with the same paragraph (indented as the continuation, not an item of
// its own), the words that did not fit move to its start and it is fitted in
// turn, so a paragraph is reflowed instead of leaving a word on a line of its
// own. Lines that fit are left as written.
func FitText(text string, width int) string {
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
		wrapped := wrapWhole(strings.TrimPrefix(l, prefix), room)
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

// FitExample fits an Example block to width so that every line can still be
// pasted: a command wider than width is continued with " \" at a space
// outside quotes (a flag kept with its value), its further lines indented
// four more; a comment is continued as a comment.
func FitExample(text string, width int) string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if ansi.StringWidth(l) <= width {
			continue
		}
		indent := l[:len(l)-len(strings.TrimLeft(l, " "))]
		body := strings.TrimPrefix(l, indent)
		if strings.HasPrefix(body, "#") {
			room := max(width-len(indent)-2, 20)
			lines[i] = indent + "# " + strings.Join(wrapWhole(strings.TrimPrefix(body, "#"), room), "\n"+indent+"# ")
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
