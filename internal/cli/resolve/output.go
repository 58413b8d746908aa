package resolve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/recovery"
)

// ResolveRecord is one line of `resolve -o json` and of --report.
type ResolveRecord struct {
	Line         int             `json:"line,omitempty"`
	Tenant       string          `json:"tenant"`
	OperationID  string          `json:"operation_id"`
	Class        string          `json:"class"`
	Outcome      string          `json:"outcome"`
	Response     json.RawMessage `json:"response"`
	StoredHash   *string         `json:"stored_hash"`
	StoredClass  string          `json:"stored_class,omitempty"`
	IncomingHash *string         `json:"incoming_hash"`
	QuarantineID *int64          `json:"quarantine_id"`
	Error        *string         `json:"error"`
	Note         string          `json:"note,omitempty"`
	// EntryPlan is the entry plan (record plan, import) that entered an
	// already_applied identity without its effect: its effect never ran.
	EntryPlan *int64 `json:"entry_plan,omitempty"`
	// Conditional (dry run): the prediction holds unless the operation's own
	// effect refuses it (then error, nothing written).
	Conditional bool `json:"conditional,omitempty"`
	// Changes are the values that differ from the stored payload (a
	// conflict of a real run).
	Changes []recovery.Change `json:"changes,omitempty"`
	// Redrive is what was sent to the class's service, when it was re-driven.
	Redrive *recovery.RedriveTrace `json:"redrive,omitempty"`
}

func newResolveRecord(r recovery.Result) ResolveRecord {
	rec := ResolveRecord{Line: r.Line, Tenant: r.Tenant, OperationID: r.OperationID, Class: r.Class,
		Outcome: string(r.Outcome), Response: r.Response, StoredHash: nullString(r.StoredHash),
		StoredClass: r.StoredClass, IncomingHash: nullString(r.IncomingHash), Note: r.Note, Redrive: r.Redrive,
		Conditional: r.Conditional, Changes: r.Changes}
	if r.QuarantineID != 0 {
		rec.QuarantineID = &r.QuarantineID
	}
	if r.EntryPlan != 0 {
		rec.EntryPlan = &r.EntryPlan
	}
	if r.Err != nil {
		msg := cmdutil.OneLine(r.Err.Error())
		rec.Error = &msg
	}
	return rec
}

func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// summaryLine is the one-line summary: "12 operations: 10 applied, 2 conflict".
func summaryLine(s recovery.RunSummary) string {
	var parts []string
	for _, o := range recovery.Outcomes {
		if n := s.Counts[o]; n > 0 {
			parts = append(parts, cmdutil.HumanCount(int64(n))+" "+string(o))
		}
	}
	line := cmdutil.CountOf(int64(s.Counts.Total()), "operation")
	if s.DryRun {
		line += " (dry run, nothing written)"
	}

	if len(parts) > 0 {
		line += ": " + strings.Join(parts, ", ")
	}
	if s.Conditional > 0 {
		line += " (" + cmdutil.HumanCount(int64(s.Conditional)) + " conditional: the effect's own checks decide)"
	}
	if s.Redriven > 0 {
		line += "; " + cmdutil.HumanCount(int64(s.Redriven)) + " sent to their class's service"
		if s.RedriveUnknown > 0 {
			line += " (" + cmdutil.HumanCount(int64(s.RedriveUnknown)) + " with no usable answer: outcome unknown)"
		}
	}
	if s.NotSent > 0 {
		line += "; " + cmdutil.HumanCount(int64(s.NotSent)) + " not sent (their service could not be reached; nothing ran)"
	}
	if s.Interrupted {
		line += "; interrupted, " + cmdutil.HumanCount(int64(s.Read)) + " read"
	}
	return line
}

// outcomeMeaning explains each outcome in the summary table.
var outcomeMeaning = map[recovery.Outcome]string{
	recovery.AlreadyApplied: "was applied before; saved response returned",
	recovery.Applied:        "was absent; applied now, once",
	recovery.WouldApply:     conditionalMeaning,
	recovery.WouldRedrive:   "absent; a real run would send it to its class's service, whose own checks decide (nothing sent now)",
	recovery.Pending:        "sent to its service (its stream, or it asked to wait), not recorded yet: run it again later",
	recovery.Purged:         "purged under a proven replay horizon",
	recovery.Conflict:       "another payload under this identity; quarantined, nothing ran",
	recovery.WouldConflict:  "another payload under this identity; a real run would quarantine it",
	recovery.Invalid:        "bad input line; nothing written",
	recovery.Failed:         "not settled; the error says why (a failed effect wrote nothing)",
}

// dryAlreadyApplied is already_applied's meaning in a dry run, which
// compares hashes and reads no saved response (-o json: "response": null).
const dryAlreadyApplied = "was applied before; a real run returns its saved response (a dry run does not read it)"

// conditionalMeaning is a would_apply's, which is always conditional (-o
// json: "conditional": true): the dry run cannot run the effect's own checks.
const conditionalMeaning = "absent; a real run would run the effect, whose own checks decide (applied, or error with nothing written)"

// failedMeaning is the meaning of the error row: a re-drive the service may
// have received with no usable answer has an unknown outcome, which "wrote
// nothing" would contradict.
func failedMeaning(s recovery.RunSummary) string {
	if s.RedriveUnknown == 0 {
		return outcomeMeaning[recovery.Failed]
	}
	m := "not settled; the error says why: " + cmdutil.HumanCount(int64(s.RedriveUnknown)) +
		" sent to their service with no usable answer have an unknown outcome (resolve them again)"
	if rest := s.Counts[recovery.Failed] - s.RedriveUnknown; rest > 0 {
		m += "; the other " + cmdutil.HumanCount(int64(rest)) + " wrote nothing"
	}
	return m
}

// resultMeaning is the meaning of one operation's outcome (dryRun: of a
// dry run's answer, which carries no saved response).
func resultMeaning(r recovery.Result, dryRun bool) string {
	switch {
	case dryRun && r.EntryPlan != 0:
		return "entered before by an entry plan, without its effect; a real run returns its saved response (a dry run does not read it)"
	case dryRun && r.Outcome == recovery.AlreadyApplied && r.Note == "":
		return dryAlreadyApplied
	case errors.Is(r.Err, recovery.ErrRedriveUnknown):
		return "not settled; sent to its service with no usable answer: the outcome is unknown (resolve it again)"
	case errors.Is(r.Err, recovery.ErrRedriveNotSent):
		return "not settled; never reached its service: nothing ran, nothing written"
	case r.Conditional && r.Outcome == recovery.WouldApply:
		return conditionalMeaning
	case r.EntryPlan != 0:
		return "entered before by an entry plan, without its effect; saved response returned"
	}
	return outcomeMeaning[r.Outcome]
}

func printResolveSummary(w io.Writer, s recovery.RunSummary, attention []recovery.Result, more int, report string) error {
	var rows [][]string
	for _, o := range recovery.Outcomes {
		if n := s.Counts[o]; n > 0 {
			meaning := outcomeMeaning[o]
			if o == recovery.AlreadyApplied && s.DryRun {
				meaning = dryAlreadyApplied
			}
			switch {
			case o == recovery.Failed:
				meaning = failedMeaning(s)
			case o == recovery.AlreadyApplied && s.Entered > 0:
				meaning += "; " + cmdutil.HumanCount(int64(s.Entered)) +
					" of them entered by an entry plan (recorded by hand or imported): their effect never ran here (-o json: note, entry_plan)"
			case o == recovery.AlreadyApplied && s.DryRun:
				if c := s.Conditional - s.Counts[recovery.WouldApply] - s.Counts[recovery.WouldRedrive]; c > 0 {
					meaning = "was applied before, or (" + cmdutil.HumanCount(int64(c)) +
						") repeats a line of this input that a real run applies first: conditional on that line's effect"
				}
			}
			rows = append(rows, []string{string(o), cmdutil.HumanCount(int64(n)), meaning})
		}
	}
	rows = append(rows, []string{"total", cmdutil.HumanCount(int64(s.Counts.Total())), ""})
	fmt.Fprintln(w, "resolve: "+summaryLine(s))
	if err := cmdutil.PrintTable(w, []string{"outcome", "count", "meaning"}, rows); err != nil {
		return err
	}
	if len(attention) == 0 {
		return nil
	}
	fmt.Fprintln(w, "Needs attention:")
	rows = rows[:0]
	for _, r := range attention {
		rows = append(rows, []string{fmt.Sprint(r.Line), escapeControl(r.Tenant), escapeControl(r.OperationID), string(r.Outcome), attentionDetail(r)})
	}
	if err := cmdutil.PrintTable(w, []string{"line", "tenant", "operation_id", "outcome", "detail"}, rows); err != nil {
		return err
	}
	if more > 0 {
		if report != "" {
			fmt.Fprintf(w, "... and %s more: every row is in %s.\n", cmdutil.HumanCount(int64(more)), report)
		} else {
			fmt.Fprintf(w, "... and %s more: use -o json or --report FILE for every row.\n", cmdutil.HumanCount(int64(more)))
		}
	}
	return nil
}

func attentionDetail(r recovery.Result) string {
	switch r.Outcome {
	case recovery.Conflict, recovery.WouldConflict:
		if r.StoredHash == "" && r.Note != "" {
			return r.Note
		}
		d := "stored " + shortHash(r.StoredHash) + ", incoming " + shortHash(r.IncomingHash)
		if len(r.Changes) > 0 {
			d = describeChanges(r.Changes)
		}
		if r.StoredClass != "" {
			d = "stored class " + r.StoredClass + ", " + d
		}
		if r.QuarantineID != 0 {
			d = fmt.Sprintf("quarantined as #%d: %s (idemctl quarantine show %d)", r.QuarantineID, d, r.QuarantineID)
		}
		return d
	}
	if r.Err != nil {
		return attentionError(cmdutil.OneLine(r.Err.Error()))
	}
	return ""
}

// maxDetailRunes is how much of an error the attention table shows: the
// detail column wraps on a terminal, so a reason is shown whole; only an
// error longer than this (a driver's message quoting a whole payload) is
// cut, and the cut says where the whole text is.
const maxDetailRunes = 600

func attentionError(msg string) string {
	msg = escapeControl(msg)
	if r := []rune(msg); len(r) > maxDetailRunes {
		return string(r[:maxDetailRunes]) + "… (cut here: the whole error is in -o json and --report FILE)"
	}
	return msg
}

// maxChangesShown is how many changed values a conflict's row names.
const maxChangesShown = 3

// describeChanges names the values that changed, "/amount 1101 -> 2101",
// at most maxChangesShown, then "+N more".
func describeChanges(changes []recovery.Change) string {
	var parts []string
	for i, c := range changes {
		if i == maxChangesShown {
			parts = append(parts, fmt.Sprintf("+%d more", len(changes)-maxChangesShown))
			break
		}
		ptr := c.Pointer
		if ptr == "" {
			ptr = "(whole payload)"
		}
		parts = append(parts, escapeControl(ptr)+" "+changeValue(c.Stored)+" -> "+changeValue(c.Incoming))
	}
	return strings.Join(parts, ", ")
}

// changeValue is one side of a change, compact, cut to 40 characters.
func changeValue(v json.RawMessage) string {
	var b bytes.Buffer
	if len(v) == 0 || json.Compact(&b, v) != nil {
		return "null"
	}
	s := []rune(escapeControl(b.String()))
	if len(s) > 40 {
		return string(s[:39]) + "…"
	}
	return string(s)
}

// escapeControl writes the control characters of s as Go escapes (\t,
// \x1b, \u0085), so that an id holding one cannot move the cursor or break
// a table's columns, which are measured after.
func escapeControl(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func shortHash(h string) string {
	if len(h) > len(idem.HashPrefix)+12 {
		return h[:len(idem.HashPrefix)+12] + "…"
	}
	return h
}

func printResolveResult(w io.Writer, r recovery.Result, dryRun bool) error {
	response := cmdutil.OrDash(string(r.Response))
	if dryRun && r.Response == nil && r.Outcome == recovery.AlreadyApplied {
		response = "- (a dry run does not read it)"
	}
	rows := [][]string{
		{"outcome", string(r.Outcome)},
		{"tenant", escapeControl(r.Tenant)},
		{"operation_id", escapeControl(r.OperationID)},
		{"class", r.Class},
		{"response", response},
		{"incoming_hash", cmdutil.OrDash(r.IncomingHash)},
		{"stored_hash", cmdutil.OrDash(r.StoredHash)},
	}
	if r.StoredClass != "" {
		rows = append(rows, []string{"stored_class", r.StoredClass})
	}
	if r.QuarantineID != 0 {
		rows = append(rows, []string{"quarantine_id", fmt.Sprint(r.QuarantineID)})
	}
	if len(r.Changes) > 0 {
		rows = append(rows, []string{"changed", describeChanges(r.Changes)})
	}
	if r.Err != nil {
		rows = append(rows, []string{"error", cmdutil.OneLine(r.Err.Error())})
	}
	if r.Note != "" {
		rows = append(rows, []string{"note", r.Note})
	}
	if d := r.Redrive; d != nil {
		rows = append(rows, []string{"re-drive", fmt.Sprintf("%s %s: %d attempt(s), replies %s, verified on the primary: %s",
			d.Via, d.Target, d.Attempts, strings.Join(d.Replies, ", "), d.Verified)})
	}
	if meaning := resultMeaning(r, dryRun); meaning != "" {
		rows = append(rows, []string{"meaning", meaning})
	}
	return cmdutil.PrintTable(w, []string{"field", "value"}, rows)
}
