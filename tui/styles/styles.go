// Package styles holds every lipgloss style of idemctl's TUI in one place, so
// that views never pick colours themselves and NO_COLOR is honoured once.
//
// Colour only ever repeats what the text already says: every highlight also
// has a textual marker ("!", "stored"/"incoming", "[ok]", "error:"), so the
// console reads the same with NO_COLOR set.
package styles

import (
	"io"
	"os"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
)

// Styles are the TUI's styles, all built on one renderer.
type Styles struct {
	// Renderer is the lipgloss renderer every style was built on.
	Renderer *lipgloss.Renderer
	// NoColor is true when the renderer's profile is ASCII (no colour, no
	// bold or reverse): views then rely on their textual markers alone.
	NoColor bool

	Header    lipgloss.Style // the top line: operator and database
	HeaderKey lipgloss.Style // labels inside the header
	Tab       lipgloss.Style
	ActiveTab lipgloss.Style
	Title     lipgloss.Style // a view's title line
	Label     lipgloss.Style // field labels
	Muted     lipgloss.Style // secondary text
	Selected  lipgloss.Style // the selected row
	Column    lipgloss.Style // table column headings

	Error   lipgloss.Style
	Success lipgloss.Style
	Warning lipgloss.Style
	Info    lipgloss.Style

	// Evidence highlights.
	DiffPath     lipgloss.Style
	DiffStored   lipgloss.Style
	DiffIncoming lipgloss.Style
	HashStored   lipgloss.Style
	HashIncoming lipgloss.Style

	// Status of a quarantine record, a step, a plan.
	Open     lipgloss.Style
	Rejected lipgloss.Style
	Accepted lipgloss.Style

	StepOK      lipgloss.Style
	StepFailed  lipgloss.Style
	StepSkipped lipgloss.Style
	StepRunning lipgloss.Style
	StepPending lipgloss.Style

	// Focused marks the focused form field's label.
	Focused lipgloss.Style

	HelpKey  lipgloss.Style
	HelpDesc lipgloss.Style
	HelpSep  lipgloss.Style

	// ProgressFull and ProgressEmpty are the colours of the purge progress bar.
	ProgressFull  string
	ProgressEmpty string
}

// Palette. Plain ANSI-256 colours, never adaptive ones: an adaptive colour
// makes lipgloss query the terminal's background, which can stall on a
// terminal (or pseudo-terminal) that does not answer.
const (
	colRed    = "203"
	colGreen  = "78"
	colYellow = "221"
	colBlue   = "75"
	colCyan   = "80"
	colPurple = "141"
	colGrey   = "245"
	colDim    = "240"
	colFg     = "252"
	colSelBg  = "237"
)

// DefaultStyles returns the styles on lipgloss's default renderer, which
// detects the terminal's colour support (and NO_COLOR) on standard output.
func DefaultStyles() Styles {
	return New(lipgloss.DefaultRenderer())
}

// NoColorEnv reports whether the environment asks for no colour
// (https://no-color.org: NO_COLOR set to anything non-empty).
func NoColorEnv() bool {
	return os.Getenv("NO_COLOR") != ""
}

// ForOutput returns styles for a program writing to w. With noColor the
// renderer is forced to the ASCII profile, whatever w supports.
func ForOutput(w io.Writer, noColor bool) Styles {
	r := lipgloss.NewRenderer(w)
	if noColor {
		r.SetColorProfile(termenv.Ascii)
	}
	return New(r)
}

// Ascii returns styles that render no escape sequence at all (NO_COLOR, and
// golden tests).
func Ascii() Styles {
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(termenv.Ascii)
	return New(r)
}

// New builds the styles on r.
func New(r *lipgloss.Renderer) Styles {
	fg := func(c string) lipgloss.Style { return r.NewStyle().Foreground(lipgloss.Color(c)) }
	s := Styles{
		Renderer: r,
		NoColor:  r.ColorProfile() == termenv.Ascii,

		Header:    r.NewStyle().Bold(true),
		HeaderKey: fg(colGrey),
		Tab:       fg(colGrey),
		ActiveTab: r.NewStyle().Bold(true).Foreground(lipgloss.Color(colBlue)).Underline(true),
		Title:     r.NewStyle().Bold(true).Foreground(lipgloss.Color(colBlue)),
		Label:     fg(colGrey),
		Muted:     fg(colDim),
		Selected:  r.NewStyle().Bold(true).Foreground(lipgloss.Color(colFg)).Background(lipgloss.Color(colSelBg)),
		Column:    r.NewStyle().Bold(true).Foreground(lipgloss.Color(colGrey)),

		Error:   r.NewStyle().Bold(true).Foreground(lipgloss.Color(colRed)),
		Success: r.NewStyle().Bold(true).Foreground(lipgloss.Color(colGreen)),
		Warning: r.NewStyle().Bold(true).Foreground(lipgloss.Color(colYellow)),
		Info:    fg(colCyan),

		DiffPath:     r.NewStyle().Bold(true).Foreground(lipgloss.Color(colYellow)),
		DiffStored:   fg(colCyan),
		DiffIncoming: r.NewStyle().Bold(true).Foreground(lipgloss.Color(colRed)),
		HashStored:   fg(colCyan),
		HashIncoming: r.NewStyle().Bold(true).Foreground(lipgloss.Color(colRed)),

		Open:     r.NewStyle().Bold(true).Foreground(lipgloss.Color(colYellow)),
		Rejected: fg(colRed),
		Accepted: fg(colGreen),

		StepOK:      r.NewStyle().Bold(true).Foreground(lipgloss.Color(colGreen)),
		StepFailed:  r.NewStyle().Bold(true).Foreground(lipgloss.Color(colRed)),
		StepSkipped: fg(colDim),
		StepRunning: r.NewStyle().Bold(true).Foreground(lipgloss.Color(colPurple)),
		StepPending: fg(colDim),

		Focused: r.NewStyle().Bold(true).Foreground(lipgloss.Color(colBlue)),

		HelpKey:  fg(colGrey),
		HelpDesc: fg(colDim),
		HelpSep:  fg(colDim),

		ProgressFull:  colGreen,
		ProgressEmpty: colDim,
	}
	return s
}

// Profile is the renderer's colour profile (for components that take one).
func (s Styles) Profile() termenv.Profile { return s.Renderer.ColorProfile() }
