package cmdutil

import (
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/idemctl/idemctl/internal/textfit"
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
	cobra.AddTemplateFunc("fitText", func(text string, cmd *cobra.Command) string { return textfit.Text(text, helpWidth(cmd)) })
	cobra.AddTemplateFunc("fitExample", func(text string, cmd *cobra.Command) string { return textfit.Example(text, helpWidth(cmd)) })
}

// useLineHelp is cmd's usage line, its arguments wrapped under the first.
func useLineHelp(cmd *cobra.Command) string {
	line := cmd.UseLine()
	prefix := cmd.CommandPath() + " "
	if !strings.HasPrefix(line, prefix) {
		return "  " + line
	}
	return textfit.HangingIndent("  "+prefix, strings.TrimPrefix(line, prefix), helpWidth(cmd))
}

// flagUsagesHelp is fs's flag list wrapped at cmd's help width. pflag
// leaves a word wider than what remains of its first line whole: FitText
// then wraps that line under the usage column.
func flagUsagesHelp(fs *pflag.FlagSet, cmd *cobra.Command) string {
	return textfit.Text(fs.FlagUsagesWrapped(helpWidth(cmd)), helpWidth(cmd))
}

// commandLineHelp is sub's line in its parent's command list: the name
// padded as cobra pads it, the short description wrapped under itself.
func commandLineHelp(sub *cobra.Command) string {
	prefix := "  " + sub.Name() + strings.Repeat(" ", max(sub.NamePadding()-len(sub.Name()), 0)) + " "
	return textfit.HangingIndent(prefix, sub.Short, helpWidth(sub))
}
