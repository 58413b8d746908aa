package cmdutil

import (
	"bytes"
	"io"
	"os"
	"strconv"

	"golang.org/x/term"

	textterm "github.com/idemctl/idemctl/internal/term"
)

// IOStreams are the command's standard streams and what they are attached to.
// Out and ErrOut escape control characters (package term): text from the
// database or from input never reaches the terminal raw. The TUI, which
// draws with escape sequences of its own, writes to RawOut.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
	// RawOut is standard output unescaped (the TUI's screen, the lab
	// worker's protocol).
	RawOut io.Writer

	stdinTTY, stdoutTTY, stderrTTY bool
	// width is the terminal's width in cells (0 when stdout is not one);
	// errWidth the same for stderr, where previews and reports go.
	width, errWidth int
	// color: stdout is a terminal that takes colour (NO_COLOR unset).
	color bool
}

// System returns the process's streams.
func System() *IOStreams {
	return &IOStreams{
		In: os.Stdin, Out: textterm.Writer(os.Stdout, false), ErrOut: textterm.Writer(os.Stderr, true), RawOut: os.Stdout,
		stdinTTY:  term.IsTerminal(int(os.Stdin.Fd())),
		stdoutTTY: term.IsTerminal(int(os.Stdout.Fd())),
		stderrTTY: term.IsTerminal(int(os.Stderr.Fd())),
		width:     termWidth(os.Stdout),
		errWidth:  termWidth(os.Stderr),
		color:     colorWanted(term.IsTerminal(int(os.Stdout.Fd())), os.Getenv),
	}
}

// termWidth is the width tables on f fit: COLUMNS when set, else the
// terminal's, else 0 (a pipe or a file: no limit).
func termWidth(f *os.File) int {
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	if w, _, err := term.GetSize(int(f.Fd())); err == nil && w > 0 {
		return w
	}
	return 0
}

// Test returns in-memory streams for tests; tty says whether they act as
// terminals. The buffers receive what a terminal would (escaped).
func Test(tty bool) (*IOStreams, *bytes.Buffer, *bytes.Buffer, *bytes.Buffer) {
	in, out, errOut := &bytes.Buffer{}, &bytes.Buffer{}, &bytes.Buffer{}
	return &IOStreams{In: in, Out: textterm.Writer(out, false), ErrOut: textterm.Writer(errOut, true), RawOut: out,
		stdinTTY: tty, stdoutTTY: tty, stderrTTY: tty, width: testWidth(tty), errWidth: testWidth(tty)}, in, out, errOut
}

// testWidth is the width of a test terminal: 80 columns, none for a pipe.
func testWidth(tty bool) int {
	if tty {
		return 80
	}
	return 0
}

// colorWanted reports whether a terminal gets colour: never without one,
// nor with NO_COLOR set (https://no-color.org) or TERM=dumb.
func colorWanted(tty bool, getenv func(string) string) bool {
	return tty && getenv("NO_COLOR") == "" && getenv("TERM") != "dumb"
}

// ColorEnabled reports whether standard output takes colour.
func (s *IOStreams) ColorEnabled() bool { return s.color }

// SetColor turns colour on or off (tests).
func (s *IOStreams) SetColor(on bool) { s.color = on }

// SetWidth sets the width of the terminal the streams act as (tests).
func (s *IOStreams) SetWidth(w int) { s.width, s.errWidth = w, w }

// IsStdoutTTY reports whether standard output is a terminal.
func (s *IOStreams) IsStdoutTTY() bool { return s.stdoutTTY }

// IsStderrTTY reports whether standard error is a terminal (progress goes there).
func (s *IOStreams) IsStderrTTY() bool { return s.stderrTTY }

// CanPrompt reports whether a person can answer a question.
func (s *IOStreams) CanPrompt() bool { return s.stdinTTY && s.stdoutTTY }
