// Package termquiet stops bubbletea v1 from querying the terminal's
// background colour when the program starts, whatever command runs.
//
// bubbletea's package init calls lipgloss.HasDarkBackground, which writes
// ESC]11;? and ESC[6n to a terminal and waits up to 5 s for an answer a
// pseudo-terminal may never give (script, expect, ssh -tt): every idemctl
// command paid it, `idemctl version` included. This package's init tells
// lipgloss's default renderer the background instead, so that query never
// happens. The console (idemctl tui), the one command whose components
// have adaptive colours, takes the answer from COLORFGBG when the terminal
// sets it (tui.Run), never from a question with a 5 s wait.
//
// It works because of Go's package initialisation order: packages are
// initialised in the order of their import paths, each as soon as its own
// imports are (the Go spec, "Package initialization", since Go 1.21). This
// module's path, 0init.idemctl/termquiet, sorts before
// github.com/charmbracelet/bubbletea, and it imports lipgloss only, so its
// init runs after lipgloss's and before bubbletea's. It is a module of its
// own (go.mod replaces it with this directory) because no import path of
// github.com/idemctl/idemctl sorts before bubbletea's. cmd/idemctl imports
// it; internal/cli's TestNoTerminalQueryAtStart checks it under a pty.
package termquiet

import "github.com/charmbracelet/lipgloss"

func init() {
	// Dark, as most terminals: the console sets the answer it gets, and
	// the commands other than the console print no adaptive colour.
	lipgloss.SetHasDarkBackground(true)
}
