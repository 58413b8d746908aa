package cli

import (
	"errors"
	"fmt"
)

// Exit codes, the same for every command. Documented in `idemctl --help` and
// the README.
const (
	ExitOK         = 0 // every operation converged
	ExitFailure    = 1 // any other failure (database unreachable, I/O error)
	ExitUsage      = 2 // bad flags or arguments
	ExitConflict   = 3 // at least one conflict (quarantined)
	ExitNotPrimary = 4 // refused: not the authoritative primary
	ExitInvalid    = 5 // invalid input, or an operation failed (nothing written for it)
	ExitPending    = 6 // re-driven through a stream, not recorded yet: run it again later
)

// exitCodesHelp is appended to the root command's help.
const exitCodesHelp = `Exit codes:
  0  success: every operation converged (applied or already applied)
  1  failure: database unreachable, I/O error, anything else
  2  usage: bad flags or arguments
  3  at least one conflict (the request was quarantined, nothing ran)
  4  refused: the server is a standby or the session is read-only
  5  invalid input, or an operation failed (nothing was written for it)
  6  pending: re-driven through a stream and not recorded yet (run it again later)`

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

// codeOf returns the exit code err stands for.
func codeOf(err error) int {
	if err == nil {
		return ExitOK
	}
	var s silentExit
	if errors.As(err, &s) {
		return s.code
	}
	var e *ExitError
	if errors.As(err, &e) {
		return e.Code
	}
	return ExitFailure
}
