package cli

import (
	"bytes"
	"io"
	"os"

	"golang.org/x/term"
)

// IOStreams are the command's standard streams and what they are attached to.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer

	stdinTTY, stdoutTTY, stderrTTY bool
}

// System returns the process's streams.
func System() *IOStreams {
	return &IOStreams{
		In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr,
		stdinTTY:  term.IsTerminal(int(os.Stdin.Fd())),
		stdoutTTY: term.IsTerminal(int(os.Stdout.Fd())),
		stderrTTY: term.IsTerminal(int(os.Stderr.Fd())),
	}
}

// Test returns in-memory streams for tests; tty says whether they act as terminals.
func Test(tty bool) (*IOStreams, *bytes.Buffer, *bytes.Buffer, *bytes.Buffer) {
	in, out, errOut := &bytes.Buffer{}, &bytes.Buffer{}, &bytes.Buffer{}
	return &IOStreams{In: in, Out: out, ErrOut: errOut, stdinTTY: tty, stdoutTTY: tty, stderrTTY: tty}, in, out, errOut
}

// IsStdoutTTY reports whether standard output is a terminal.
func (s *IOStreams) IsStdoutTTY() bool { return s.stdoutTTY }

// IsStderrTTY reports whether standard error is a terminal (progress goes there).
func (s *IOStreams) IsStderrTTY() bool { return s.stderrTTY }

// CanPrompt reports whether a person can answer a question.
func (s *IOStreams) CanPrompt() bool { return s.stdinTTY && s.stdoutTTY }
