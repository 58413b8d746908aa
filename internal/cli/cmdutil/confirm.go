package cmdutil

import (
	"bufio"
	"fmt"
	"strings"
)

// The confirmations of every command that decides, approves, purges or
// changes something: on a terminal it asks first (--yes skips the question);
// without one it needs --yes; a "no" ends the command with exit 1 and says
// what was not done.

// NeedYes refuses a confirming command without a terminal to ask on and
// without --yes.
func NeedYes(io *IOStreams, yes bool, what string) error {
	if yes || io.CanPrompt() {
		return nil
	}
	return UsageErr("%s: pass --yes (-y) when there is no terminal to confirm on", what)
}

// confirmAction asks a yes/no question on the terminal; only "y" or "yes" agree.
func confirmAction(io *IOStreams, question string) bool {
	fmt.Fprintf(io.ErrOut, "%s [y/N] ", question)
	line, _ := bufio.NewReader(io.In).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true
	}
	return false
}

// Confirm asks question unless yes; any answer but "y" or "yes" ends the
// command with exit 1 after printing declined ("nothing done", "nothing
// purged", ...) on stderr.
func Confirm(io *IOStreams, yes bool, question, declined string) error {
	if yes || confirmAction(io, question) {
		return nil
	}
	fmt.Fprintln(io.ErrOut, declined)
	return SilentExit{Code: ExitFailure}
}
