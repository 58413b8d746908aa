package cmdutil

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/governance"
	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/internal/textfit"
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
	ExitFailure:    "failure: database unreachable, I/O error (a file named that cannot be read or written), interrupted, anything else",
	ExitUsage:      "usage: bad flags or arguments, or no database named",
	ExitConflict:   "at least one conflict (the request was quarantined, nothing ran)",
	ExitNotPrimary: "refused: the server is a standby or the session is read-only (nothing written)",
	ExitInvalid:    "invalid input or data, or refused by a rule (nothing was written for it)",
	ExitPending:    "pending: re-driven and not recorded yet, through a stream or by a service that asked to wait (run it again later)",
	ExitNotFound:   "not found: the record, plan, correction, source or identity named does not exist",
	ExitSchema:     "schema idem is missing, older or newer than this binary (the message says what to run)",
}

// exitWhy says, per command (or per family: "horizon" holds for every
// horizon command), what a code means for it. --help and docs/exit-codes.md
// print it under the code's general meaning.
var exitWhy = map[string]map[int]string{
	"resolve": {
		ExitOK:      "every operation converged (applied, already_applied, purged, or would_apply in a dry run)",
		ExitFailure: "also an interrupted run without conflicts, invalid lines or failures, and a run stopped by an unreachable database or a failed write of its results",
		ExitInvalid: "at least one invalid line or failed operation, and no conflict",
	},
	"reconcile": {
		ExitOK:       "everything matched",
		ExitUsage:    "also an --emit-resolve or --emit-record file that exists",
		ExitConflict: "a discrepancy: a mismatch, missing in the inbox or in the report, a duplicate in the report",
		ExitFailure:  "also a report file that cannot be opened",
		ExitInvalid:  "an invalid line, or a report that is not one (empty, truncated, a corrupt gzip stream)",
	},
	"intake": {
		ExitOK:       "every message is in the inbox with its payload (the batch is empty)",
		ExitFailure:  "also a source that cannot be read",
		ExitConflict: "the batch holds operations to resolve",
		ExitInvalid:  "some messages could not be read (an invalid identity or payload) or carry no payload",
	},
	// Each horizon command its own: what one says must be able to happen
	// with that command's flags and steps.
	"horizon source add": {
		ExitUsage:   "also a secret in the source's DSN (name the variable that holds it: --password-env)",
		ExitInvalid: "an invalid source (name, kind, settings, timeout), or one of that name already",
	},
	"horizon source remove": {
		ExitUsage:    "also the built-in source manual (pending manual corrections), which cannot be removed",
		ExitInvalid:  "a login with no person, or an invalid reason",
		ExitNotFound: "no such source",
	},
	"horizon check": {
		ExitInvalid: "horizon not proven for the cutoff (a source failed, timed out, returned nonsense or can replay before the cutoff plus the margin), or unbounded (no source but the manual one), or an unknown class",
	},
	"horizon plan": {
		ExitInvalid: "horizon not proven (a source failed, timed out, returned nonsense or can replay before the cutoff plus the margin), unbounded without --accept-unbounded-horizon, a forever class without --contract or with --drop-tombstones, a cutoff inside the safety margin, a purge of the class in progress, an unknown class, or a login with no person",
	},
	"horizon approve": {
		ExitFailure:  "also a declined confirmation",
		ExitInvalid:  "approval by the planner's person or by a login with no person, a plan not waiting for approval (approved, purging, done or aborted), or a plan past its expiry",
		ExitNotFound: "no such plan",
	},
	"horizon purge": {
		ExitFailure:  "also an interrupted purge (run it again to resume) or a declined confirmation",
		ExitInvalid:  "a plan not approved (planned, done or aborted), past its expiry, purged by another session, run by a login with no person, or a purge aborted: its re-probe found what the plan did not account for, or an import entered its range after it was made",
		ExitNotFound: "no such plan",
	},
	"horizon cancel":    {ExitInvalid: "a plan already done or aborted", ExitNotFound: "no such plan"},
	"horizon status":    {ExitNotFound: "no such plan"},
	"class set":         {ExitInvalid: "unknown class, invalid policy or re-drive, a host not on the allow-list, a login with no person planning a forever class horizon or a lower min-age, or either without --reason"},
	"quarantine export": {ExitUsage: "also a --file that exists (an export is never overwritten)", ExitNotFound: "no such record"},
	"import plan":       {ExitFailure: "also a source that cannot be reached or read (unreachable, its login refused, a read that fails half way: the message names the source), nothing planned", ExitInvalid: "some rows were invalid (the plan holds the others), a source query or file that is not a store (its columns, its password variable not set), or a rule refused the plan; an unknown class, a money class without --contract, a class with a SQL effect without --correction and a login that is not an operator's are refused before the source is read"},
	"record plan":       {ExitInvalid: "a bad line of the file (named: an unknown field, no identity, no response or a JSON null one, an identity on two lines), or a rule refused the plan (a money class without --contract, a class with a SQL effect without --correction, a login that is not an operator's or maps to no person): nothing planned"},
	"import abort":      {ExitInvalid: "a plan running, done or aborted, a login with no person, or an invalid reason", ExitNotFound: "no such plan"},
	"record abort":      {ExitInvalid: "a plan running, done or aborted, a login with no person, or an invalid reason", ExitNotFound: "no such plan"},
	"corrections add":   {ExitInvalid: "invalid identity or reason"},
	"corrections done":  {ExitInvalid: "a login with no person, or its marking already waits for approval", ExitNotFound: "no pending correction with that id"},
	"quarantine list":   {ExitNotFound: "--group names a group with no open record"},
	"quarantine bulk": {
		ExitFailure:  "interrupted (run it again), declined or failed",
		ExitInvalid:  "refused (the plan's state, the same person), nothing written",
		ExitNotFound: "unknown plan",
	},
	"quarantine reject": {
		ExitOK:       "done, or nothing left to decide",
		ExitFailure:  "interrupted (run it again), declined or failed",
		ExitUsage:    "bad flags, filter or stdin, nothing written",
		ExitInvalid:  "a record already decided (single record), nothing written",
		ExitNotFound: "an unknown id (one on stdin refuses the whole run), nothing written",
	},
}

// exitReason is what code means for cmd: its own note, else its family's.
func exitReason(cmd *cobra.Command, code int) string {
	for key := CommandKey(cmd); key != ""; {
		if why, ok := exitWhy[key][code]; ok {
			return why
		}
		i := strings.LastIndexByte(key, ' ')
		if i < 0 {
			break
		}
		key = key[:i]
	}
	return ""
}

// exitCodesOf returns the codes cmd can return: 0, 1 and 2 for every
// command, 8 for those that need the schema, 4 for those that write, and the
// codes its policy adds.
func exitCodesOf(cmd *cobra.Command) []int {
	p, ok := PolicyOf(cmd)
	codes := map[int]bool{ExitOK: true, ExitFailure: true, ExitUsage: true}
	if ok {
		if p.Need == NeedSchema || p.Need == NeedWrite {
			codes[ExitSchema] = true
		}
		if p.Need == NeedWrite {
			codes[ExitNotPrimary] = true
		}
		for _, c := range p.Codes {
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
		return "\nExit codes:\n" + textfit.HangingIndent("  ", "each command's --help lists its own; idemctl --help lists them all", helpWidth(cmd)) + "\n"
	}
	// Each line wrapped at the help width, under its own text.
	width := helpWidth(cmd)
	var b strings.Builder
	b.WriteString("\nExit codes:\n")
	for _, c := range codes {
		b.WriteString(textfit.HangingIndent(fmt.Sprintf("  %d  ", c), exitMeaning[c], width) + "\n")
		if why := exitReason(cmd, c); why != "" && cmd.HasParent() {
			b.WriteString(textfit.HangingIndent("     here: ", why, width) + "\n")
		}
	}
	return b.String()
}

// ExitCodesMarkdown renders docs/exit-codes.md from the definitions above:
// every code with its meaning, then every runnable command's codes and what
// they mean for it.
func ExitCodesMarkdown(root *cobra.Command) string {
	var b strings.Builder
	b.WriteString("# Exit codes\n\n<!-- Generated from internal/cli/cmdutil/exitcode.go: go test ./internal/cli -run TestExitCodesDoc -update -->\n\n")
	b.WriteString("Defined once and used the same way by every command; each command's `--help`\nlists its own.\n\n")
	b.WriteString("| code | meaning |\n|---|---|\n")
	for _, c := range allExitCodes() {
		fmt.Fprintf(&b, "| %d | %s |\n", c, exitMeaning[c])
	}
	b.WriteString("\nWhich command can return which, and what a code means for it:\n\n| command | exit codes | what they mean here |\n|---|---|---|\n")
	cmds := RunnableOf(root)
	sort.Slice(cmds, func(i, j int) bool { return CommandKey(cmds[i]) < CommandKey(cmds[j]) })
	for _, c := range cmds {
		var codes, notes []string
		for _, code := range exitCodesOf(c) {
			codes = append(codes, fmt.Sprint(code))
			if why := exitReason(c, code); why != "" {
				notes = append(notes, fmt.Sprintf("%d: %s", code, why))
			}
		}
		fmt.Fprintf(&b, "| `idemctl %s` | %s | %s |\n", CommandKey(c), strings.Join(codes, " "), strings.Join(notes, "; "))
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

// WithCode wraps err with an exit code.
func WithCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &ExitError{Code: code, Err: err}
}

// FileErr is the error of a file named on the command line that cannot be
// read or written (missing, a directory that does not exist, no
// permission): exit 1, an I/O error, whichever command or flag named it.
func FileErr(format string, args ...any) error {
	return &ExitError{Code: ExitFailure, Err: fmt.Errorf(format, args...)}
}

// UsageErr is a usage error (exit 2).
func UsageErr(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// SilentExit ends the command with a code after it has printed its own report.
type SilentExit struct{ Code int }

func (s SilentExit) Error() string { return fmt.Sprintf("exit %d", s.Code) }

// notFound are the domain packages' "no such thing" errors: whatever code a
// command wrapped them in, they exit ExitNotFound.
var notFound = []error{quarantine.ErrNotFound, horizon.ErrPlanNotFound, horizon.ErrCorrectionNotFound,
	horizon.ErrSourceNotFound, ErrIdentityNotFound}

// CodeOf returns the exit code err stands for.
func CodeOf(err error) int {
	if err == nil {
		return ExitOK
	}
	var s SilentExit
	if errors.As(err, &s) {
		return s.Code
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

// RunnableOf lists every command of the tree a user can run (not hidden,
// not help or completion), depth first.
func RunnableOf(root *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			if sub.Runnable() {
				out = append(out, sub)
			}
			walk(sub)
		}
	}
	walk(root)
	return out
}

// GovernanceErr gives a governance refusal its exit code.
func GovernanceErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, governance.ErrNotFound), errors.Is(err, governance.ErrSourceNotFound):
		return WithCode(ExitNotFound, err)
	case errors.Is(err, governance.ErrNotOperator):
		// A service's or an auditor's login: say which role the command
		// needs, not only the SQLSTATE.
		return WithCode(ExitInvalid, fmt.Errorf("%w; this command needs an operator's login (granted the schema's operator role, idem_operator by default) mapped to a person: log in as one (idemctl person list names them)", err))
	}
	for _, refusal := range []error{governance.ErrState, governance.ErrSamePerson, governance.ErrStale, governance.ErrRefused,
		governance.ErrNoPerson, governance.ErrUnknownClass, governance.ErrInvalidOperator} {
		if errors.Is(err, refusal) {
			return WithCode(ExitInvalid, err)
		}
	}
	return err
}

// ErrIdentityNotFound: the identity has neither an inbox record nor a
// tombstone (exit code 7).
var ErrIdentityNotFound = errors.New("identity not found")
