package cli

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/quarantine"
)

// Exit codes, defined here once and used the same way by every command. Each
// command's --help lists the ones it can return (exitCodesOf); the README
// has the same table.
const (
	ExitOK         = 0 // success: every operation converged
	ExitFailure    = 1 // any other failure (database unreachable, I/O error, interrupted)
	ExitUsage      = 2 // bad flags or arguments, or no database named
	ExitConflict   = 3 // at least one conflict (quarantined)
	ExitNotPrimary = 4 // refused: the server is a standby or the session is read-only
	ExitInvalid    = 5 // invalid input or data, or a rule refused it (nothing written for it)
	ExitPending    = 6 // re-driven, not recorded yet (a stream, or the service asked to wait): run it again later
	ExitNotFound   = 7 // the record, plan, correction, source or identity named does not exist
	ExitSchema     = 8 // schema idem is missing, older or newer than this binary
)

// exitMeaning is each code's line in --help and the README.
var exitMeaning = map[int]string{
	ExitOK:         "success",
	ExitFailure:    "failure: database unreachable, I/O error, interrupted, anything else",
	ExitUsage:      "usage: bad flags or arguments, or no database named",
	ExitConflict:   "at least one conflict (the request was quarantined, nothing ran)",
	ExitNotPrimary: "refused: the server is a standby or the session is read-only (nothing written)",
	ExitInvalid:    "invalid input or data, or refused by a rule (nothing was written for it)",
	ExitPending:    "pending: re-driven and not recorded yet, through a stream or by a service that asked to wait (run it again later)",
	ExitNotFound:   "not found: the record, plan, correction, source or identity named does not exist",
	ExitSchema:     "schema idem is missing, older or newer than this binary (the message says what to run)",
}

// exitCodesOf returns the codes cmd can return: 0, 1 and 2 for every
// command, 8 for those that need the schema, 4 for those that write, and the
// codes its policy adds.
func exitCodesOf(cmd *cobra.Command) []int {
	p, ok := policyOf(cmd)
	codes := map[int]bool{ExitOK: true, ExitFailure: true, ExitUsage: true}
	if ok {
		if p.need == needSchema || p.need == needWrite {
			codes[ExitSchema] = true
		}
		if p.need == needWrite {
			codes[ExitNotPrimary] = true
		}
		for _, c := range p.codes {
			codes[c] = true
		}
	}
	out := make([]int, 0, len(codes))
	for c := range codes {
		out = append(out, c)
	}
	sort.Ints(out)
	return out
}

// allExitCodes lists every code, in order.
func allExitCodes() []int {
	out := make([]int, 0, len(exitMeaning))
	for c := range exitMeaning {
		out = append(out, c)
	}
	sort.Ints(out)
	return out
}

// The help template's {{exitCodes .}}. cobra's template functions are
// global: registered once, never from the parallel tests' NewCmdRoot.
func init() { cobra.AddTemplateFunc("exitCodes", exitCodesHelp) }

// exitCodesHelp renders the exit-code section of cmd's --help.
func exitCodesHelp(cmd *cobra.Command) string {
	codes := exitCodesOf(cmd)
	switch {
	case !cmd.HasParent():
		codes = allExitCodes()
	case !cmd.Runnable():
		return "\nExit codes:\n  each command's --help lists its own; idemctl --help lists them all\n"
	}
	var b strings.Builder
	b.WriteString("\nExit codes:\n")
	for _, c := range codes {
		fmt.Fprintf(&b, "  %d  %s\n", c, exitMeaning[c])
	}
	return b.String()
}

// ExitError carries an exit code with the error that caused it.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// withCode wraps err with an exit code.
func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &ExitError{Code: code, Err: err}
}

// usageErr is a usage error: exit code 2.
func usageErr(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// silentExit ends the command with a code after it has printed its own report.
type silentExit struct{ code int }

func (s silentExit) Error() string { return fmt.Sprintf("exit %d", s.code) }

// notFound are the domain packages' "no such thing" errors: whatever code a
// command wrapped them in, they exit ExitNotFound.
var notFound = []error{quarantine.ErrNotFound, horizon.ErrPlanNotFound, horizon.ErrCorrectionNotFound,
	horizon.ErrSourceNotFound, errIdentityNotFound}

// codeOf returns the exit code err stands for.
func codeOf(err error) int {
	if err == nil {
		return ExitOK
	}
	var s silentExit
	if errors.As(err, &s) {
		return s.code
	}
	for _, nf := range notFound {
		if errors.Is(err, nf) {
			return ExitNotFound
		}
	}
	var e *ExitError
	if errors.As(err, &e) {
		return e.Code
	}
	return ExitFailure
}
