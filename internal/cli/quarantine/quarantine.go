// Package quarantine holds `idemctl quarantine`: the conflicting retries held
// for a person (list, groups, show, export), their decisions (reject,
// accept-as-new) and the bulk plans that decide many at once.
package quarantine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/audit"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/quarantine"
)

// NewCmdQuarantine builds `idemctl quarantine` and its subcommands.
func NewCmdQuarantine(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "quarantine <command>",
		Short: "Review conflicting retries and decide them (list, groups, show, reject, accept-as-new, export)",
		Long: `A retry that reuses an identity (tenant_id, operation_id) with another payload
never runs and is never answered with the old success: it is quarantined with
its evidence (both payloads and hashes, the saved response, every differing
field) and every replay of it is refused (outcome conflict) and counted, until
a person decides:

  reject         the conflicting request must never run (refused for ever);
  accept-as-new  it is a legitimate new operation (a settlement revision, a
                 corrected amount): it runs once, under a new operation id.

Decisions are final, need --reason, and are recorded with the operator
(--operator, IDEMCTL_OPERATOR, else the OS user) and the database user, in the
audit log (idemctl audit list). The evidence itself cannot be changed or deleted.

At incident scale: groups shows what the open records have in common (class,
differing fields, tenant, source), and reject decides a whole group or filter
at once, after a preview, each record with its own audit row.`,
		Example: `  idemctl quarantine list
  idemctl quarantine groups
  idemctl quarantine reject --group g-1a2b3c4d5e6f --reason "client bug PAY-77" --dry-run
  idemctl quarantine show 42
  idemctl quarantine reject 42 --reason "amount tampering, ticket PAY-123"
  idemctl quarantine accept-as-new 42 --new-operation-id bet-7-settle-rev2 --reason "settlement revision"
  idemctl quarantine export 42 --file quarantine-42.json`,
	}
	cmd.AddCommand(
		NewCmdQuarantineList(f, nil),
		NewCmdQuarantineGroups(f, nil),
		NewCmdQuarantineShow(f, nil),
		NewCmdQuarantineReject(f, nil),
		NewCmdQuarantineAccept(f, nil),
		NewCmdQuarantineExport(f, nil),
		NewCmdQuarantineBulk(f),
	)
	return cmd
}

// QuarantineShowOptions are the flags of `idemctl quarantine show`.
type QuarantineShowOptions struct {
	IO   *cmdutil.IOStreams
	JSON bool
	ID   int64
	f    *cmdutil.Factory
}

// NewCmdQuarantineShow builds `idemctl quarantine show`.
func NewCmdQuarantineShow(f *cmdutil.Factory, runF func(*QuarantineShowOptions) error) *cobra.Command {
	opts := &QuarantineShowOptions{IO: f.IO, f: f}
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show the evidence of one quarantine record and what changed",
		Long: `Show everything a person needs to decide: the identity and class, both
canonical hashes, the stored payload and its saved response, the incoming
payload and its transport metadata, where the conflict was detected, how many
times it arrived, the decision if any, and the diff: every differing value as a
JSON Pointer (RFC 6901) with its stored and incoming values.

In the diff, CHANGE is added (only in the incoming payload), removed (only in
the stored one), type_changed (e.g. number -> string) or changed; with -o json
the diff is a list of {path, change, stored, incoming} where the absent side of
an added or removed value is null. Nothing is written.

When the other side is a provider's answer (a re-drive answered 422, the key
used there with another payload, while the inbox holds nothing), "stored side"
says so, and the answer (status, body, where it was sent) stands in for the
stored payload and response (-o json: stored_side "provider").

Exit code 7 when there is no such record.`,
		Example: `  idemctl quarantine show 42
  idemctl quarantine show 42 -o json | jq '.diff[] | [.path, .stored, .incoming]'`,
		Args: cmdutil.MaxArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseRecordID(args)
			if err != nil {
				return err
			}
			opts.ID = id
			opts.JSON = f.JSON()
			if runF != nil {
				return runF(opts)
			}
			return quarantineShowRun(cmd.Context(), opts)
		},
	}
	return cmd
}

func quarantineShowRun(ctx context.Context, opts *QuarantineShowOptions) error {
	pool, err := opts.f.Pool(ctx)
	if err != nil {
		return err
	}
	rec, err := quarantine.Show(ctx, pool, opts.ID)
	if err != nil {
		return readErr(err)
	}
	if opts.JSON {
		return cmdutil.PrintJSONLine(opts.IO.Out, rec)
	}
	return printQuarantineRecord(opts.IO, rec)
}

// printQuarantineRecord renders a record for a person: the facts, then the diff.
func printQuarantineRecord(io *cmdutil.IOStreams, rec quarantine.Record) error {
	class := rec.Class
	if rec.IncomingClass != rec.Class {
		class = fmt.Sprintf("%s (incoming: %s)", rec.Class, rec.IncomingClass)
	}
	detected := rec.Detected.ApplicationName + " as " + rec.Detected.DBUser
	if rec.Detected.Operator != "" {
		detected += ", operator " + rec.Detected.Operator
	}
	status := string(rec.Status)
	if rec.Status == quarantine.StatusOpen {
		status += ": replays refused until a person decides"
	}
	rows := [][]string{
		{"id", strconv.FormatInt(rec.ID, 10)},
		{"tenant", rec.Tenant},
		{"operation_id", rec.OperationID},
		{"class", class},
		{"status", status},
		{"seen", fmt.Sprintf("%d time(s), first %s, last %s", rec.Occurrences, cmdutil.FormatStamp(rec.FirstSeen), cmdutil.FormatStamp(rec.LastSeen))},
		{"detected by", detected},
		{"stored hash", rec.StoredHash},
		{"incoming hash", rec.IncomingHash},
		{"stored payload", string(rec.StoredPayload)},
		{"incoming payload", string(rec.IncomingPayload)},
		{"saved response", cmdutil.OrDash(string(rec.StoredResponse))},
		{"incoming transport", cmdutil.OrDash(string(rec.IncomingTransport))},
	}
	switch rec.StoredSide {
	case quarantine.StoredProvider:
		rows[7] = []string{"stored hash", "- (nothing here holds this identity)"}
		rows[9] = []string{"stored payload", "- (the key was used at the provider with another payload)"}
		rows[11] = []string{"provider's answer", string(rec.StoredResponse)}
		rows = append(rows[:7], append([][]string{{"stored side", "the provider's answer: it refused this key as used with another payload, and the inbox holds nothing"}},
			rows[7:]...)...)
	case quarantine.StoredTombstone:
		rows = append(rows[:7], append([][]string{{"stored side", "a tombstone: the stored payload and response were purged"}}, rows[7:]...)...)
	}
	if im := rec.Entered; im != nil {
		rows = append(rows,
			[]string{"incoming side", im.How() + "; accept-as-new is refused (reject it)"},
			[]string{"its answer", string(im.OldStoreResponse)})
	}
	if d := rec.Decision; d != nil {
		rows = append(rows,
			[]string{"decided", fmt.Sprintf("%s by %s at %s (operator %s), audit row %d", rec.Status, audit.Who(d.Person, d.DBUser), cmdutil.FormatStamp(d.At), d.By, d.AuditID)},
			[]string{"reason", d.Reason})
		if d.NewOperationID != "" {
			rows = append(rows, []string{"new operation", fmt.Sprintf("%s (%s)", d.NewOperationID, d.NewOutcome)})
		}
	}
	if err := cmdutil.PrintTable(io.Out, []string{"field", "value"}, rows); err != nil {
		return err
	}
	if len(rec.Diff) == 0 {
		_, err := fmt.Fprintln(io.Out, "No payload difference: the conflict is in the class.")
		return err
	}
	fmt.Fprintf(io.Out, "\nWhat changed (%d):\n", len(rec.Diff))
	diff := make([][]string, 0, len(rec.Diff))
	for _, c := range rec.Diff {
		path := c.Path
		if path == "" {
			path = "(whole payload)"
		}
		stored, incoming := cmdutil.ClipText(string(c.Stored), 60), cmdutil.ClipText(string(c.Incoming), 60)
		switch c.Kind {
		case "added":
			stored = "(absent)"
		case "removed":
			incoming = "(absent)"
		}
		diff = append(diff, []string{c.Kind, path, stored, incoming})
	}
	return cmdutil.PrintTable(io.Out, []string{"change", "path", "stored", "incoming"}, diff)
}

// QuarantineAcceptOptions are the flags of `idemctl quarantine accept-as-new`.
type QuarantineAcceptOptions struct {
	IO             *cmdutil.IOStreams
	JSON           bool
	ID             int64
	NewOperationID string
	Reason         string
	Operator       string
	// Yes skips the confirmation asked on a terminal.
	Yes bool
	// Bulk, when set, plans a bulk accept-as-new instead (no ID).
	Bulk *QuarantineAcceptPlanOptions
	f    *cmdutil.Factory
}

// NewCmdQuarantineAccept builds `idemctl quarantine accept-as-new`.
func NewCmdQuarantineAccept(f *cmdutil.Factory, runF func(*QuarantineAcceptOptions) error) *cobra.Command {
	opts := &QuarantineAcceptOptions{IO: f.IO, f: f}
	var bulkAccept acceptPlanFlags
	cmd := &cobra.Command{
		Use:   "accept-as-new (ID --new-operation-id NEW | --group ID | FILTERS | -) --reason TEXT",
		Short: "Run a conflicting payload once, as a new operation",
		Long: `Accept a quarantine record as a legitimate new operation (a settlement
revision, a corrected amount): its incoming payload runs now, through the
atomic executor, under (same tenant, NEW), in the transaction that records the
decision and its audit row. The new inbox row's transport names the record it
came from; the record names NEW.

  - It runs exactly once: two operators at once queue on the record, and the
    second is refused (exit 5) because the record is already decided, even if
    it asked for the same NEW.
  - If NEW already exists with the same payload, nothing runs again: the record
    is linked to it (outcome already_applied).
  - If NEW already exists with another payload, it is refused (exit 5) and
    nothing is written: no decision, no audit row, no conflict record.
  - The old identity keeps refusing the conflicting payload and answering the
    original one.

A record whose incoming side an import brought (quarantine show: incoming
side imported) is refused (exit 5): the old store finished that operation,
and running it again would charge twice. Reject it; if it really is a new
operation, record it by hand (idemctl record plan).

Only classes with a SQL effect can be run by idemctl; for a class whose effect
is application code, have the owning service submit the payload under NEW, then
reject this record with that reason.

On a terminal you are asked to confirm; --yes skips the question, and is
required when there is no terminal (exit code 2 without it).

Many records at once (bulk): --group ID, filters, or ids on stdin (-), with
--rule naming each new operation ({operation_id} is replaced by the record's
operation id: --rule '{operation_id}-rev2') and --max capping the count. This
only plans: it prints the preview (count, sample with the new ids; --dry-run
stops there) and records a plan that runs nothing until another person
approves it (idemctl quarantine bulk approve PLAN, four-eyes by person, as
purges); then idemctl quarantine bulk run PLAN runs it in batches, each record
with its own audit row. Exit code 5 when the database refuses the plan (a
record not open, a bad new id, over --max).`,
		Example: `  idemctl quarantine accept-as-new 42 --new-operation-id bet-7-settle-rev2 \
      --reason "settlement revision approved in BET-99"
  idemctl quarantine accept-as-new 42 --new-operation-id charge-42-corrected --reason "corrected amount" --yes -o json
  idemctl quarantine accept-as-new --group g-1a2b3c4d5e6f --rule '{operation_id}-rev2' --max 500 \
      --reason "settlement revisions, BET-99" --dry-run`,
		Args: cmdutil.MaxArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if bulk, err := bulkAccept.build(f, args); bulk || err != nil {
				if err != nil {
					return err
				}
				if opts.NewOperationID != "" {
					return cmdutil.UsageErr("--new-operation-id names one record's new operation: a bulk accept uses --rule")
				}
				if strings.TrimSpace(opts.Reason) == "" {
					return cmdutil.UsageErr("--reason is required: say why, for the record")
				}
				opts.Bulk, opts.Operator, opts.JSON = &bulkAccept.opts, f.Operator(), f.JSON()
				if runF != nil {
					return runF(opts)
				}
				return quarantineAcceptPlanRun(cmd.Context(), opts)
			}
			id, err := parseRecordID(args)
			if err != nil {
				return err
			}
			if opts.NewOperationID == "" {
				return cmdutil.UsageErr("--new-operation-id is required: the identity the payload runs under")
			}
			if err := (idem.Identity{TenantID: "t", OperationID: opts.NewOperationID}).Validate(); err != nil {
				return cmdutil.UsageErr("--new-operation-id: %s", strings.TrimPrefix(err.Error(), "invalid identity: "))
			}
			if strings.TrimSpace(opts.Reason) == "" {
				return cmdutil.UsageErr("--reason is required: say why, for the record")
			}
			if err := cmdutil.NeedYes(f.IO, opts.Yes, "accept-as-new runs the payload as a new operation"); err != nil {
				return err
			}
			opts.ID, opts.Operator = id, f.Operator()
			opts.JSON = f.JSON()
			if runF != nil {
				return runF(opts)
			}
			return quarantineAcceptRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.NewOperationID, "new-operation-id", "", "operation_id to run the incoming payload under (required)")
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "why (required; recorded with the decision)")
	cmd.Flags().BoolVarP(&opts.Yes, "yes", "y", false, "do not ask for confirmation on a terminal")
	bulkAccept.add(cmd)
	return cmd
}

func quarantineAcceptRun(ctx context.Context, opts *QuarantineAcceptOptions) error {
	pool, err := opts.f.Pool(ctx)
	if err != nil {
		return err
	}
	if err := confirmDecision(ctx, opts.IO, pool, opts.ID, opts.Yes, func(rec quarantine.Record) string {
		return fmt.Sprintf("Run the incoming payload of record %d (%s, %d change(s) from %s/%s) as operation %s/%s?",
			rec.ID, rec.IncomingClass, len(rec.Diff), rec.Tenant, rec.OperationID, rec.Tenant, opts.NewOperationID)
	}); err != nil {
		return err
	}
	acc, err := quarantine.AcceptAsNew(ctx, pool, opts.ID, opts.NewOperationID, opts.Operator, opts.Reason)
	if errors.Is(err, quarantine.ErrNeedsSecondPerson) {
		return acceptMoneyPlanRun(ctx, opts, pool)
	}
	if err != nil {
		return quarantineErr(err, cmdutil.ExitInvalid)
	}
	if opts.JSON {
		return cmdutil.PrintJSONLine(opts.IO.Out, map[string]any{
			"id": acc.Record.ID, "tenant": acc.Record.Tenant, "operation_id": acc.Record.OperationID,
			"status": acc.Record.Status, "new_operation_id": opts.NewOperationID,
			"outcome": acc.Outcome, "response": acc.Response, "decision": acc.Record.Decision,
		})
	}
	what := "ran now"
	if acc.Outcome == idem.AlreadyApplied {
		what = "was already there with this payload: linked, not run again"
	}
	_, err = fmt.Fprintf(opts.IO.Out, "Quarantine record %d accepted by %s: operation %s/%s %s.\nResponse: %s\nAudit row %d.\n",
		acc.Record.ID, audit.Who(acc.Record.Decision.Person, acc.Record.Decision.DBUser), acc.Record.Tenant, opts.NewOperationID, what, acc.Response, acc.Record.Decision.AuditID)
	return err
}

// acceptMoneyPlanRun plans the single accept-as-new of a money class: it
// runs the payload again (a second charge), so another person approves it.
func acceptMoneyPlanRun(ctx context.Context, opts *QuarantineAcceptOptions, pool idem.DBTX) error {
	p, err := quarantine.PlanAcceptOne(ctx, pool, opts.ID, opts.NewOperationID, opts.Operator, opts.Reason)
	if err != nil {
		return bulkPlanErr(err)
	}
	review, err := quarantine.Review(ctx, pool, p)
	if err != nil {
		return err
	}
	if opts.JSON {
		return cmdutil.PrintJSONLine(opts.IO.Out, review)
	}
	_, err = fmt.Fprintf(opts.IO.Out, "Record %d is of a money class: running it again needs a second person.\n"+
		"Planned as accept-as-new plan %d, nothing ran. Another person approves it: idemctl quarantine bulk approve %d\n"+
		"then it runs: idemctl quarantine bulk run %d\n\n", opts.ID, p.ID, p.ID, p.ID)
	if err != nil {
		return err
	}
	return printAcceptReview(opts.IO.Out, review, -1)
}

// QuarantineExportOptions are the flags of `idemctl quarantine export`.
type QuarantineExportOptions struct {
	IO       *cmdutil.IOStreams
	JSON     bool
	ID       int64
	File     string
	Operator string
	f        *cmdutil.Factory
}

// NewCmdQuarantineExport builds `idemctl quarantine export`.
func NewCmdQuarantineExport(f *cmdutil.Factory, runF func(*QuarantineExportOptions) error) *cobra.Command {
	opts := &QuarantineExportOptions{IO: f.IO, f: f}
	cmd := &cobra.Command{
		Use:   "export ID [--file PATH]",
		Short: "Write a self-contained JSON evidence bundle for a ticket",
		Long: `Write the evidence of one record as one JSON document: the record and its
decision, the diff, both payloads as their exact RFC 8785 canonical text, the
recorded hashes and the hashes recomputed now (verified true when they match),
instructions to check them without idemctl, and the audit row that records the
export (every export is audited).

Anyone can check a hash:
  jq -j .incoming.canonical_payload bundle.json | sha256sum
  jq -j .incoming.canonical_payload bundle.json | idemctl hash

The bundle goes to stdout, indented (one line with -o json), or to --file,
which must not exist yet (exit code 2 when it does). Exit code 7, with nothing
written, for an unknown id.`,
		Example: `  idemctl quarantine export 42 --file quarantine-42.json
  idemctl quarantine export 42 | jq .verified`,
		Args: cmdutil.MaxArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseRecordID(args)
			if err != nil {
				return err
			}
			opts.ID, opts.Operator = id, f.Operator()
			opts.JSON = f.Output == "json"
			if runF != nil {
				return runF(opts)
			}
			return quarantineExportRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.File, "file", "", "write the bundle to this new file instead of stdout")
	return cmd
}

func quarantineExportRun(ctx context.Context, opts *QuarantineExportOptions) error {
	pool, err := opts.f.Pool(ctx)
	if err != nil {
		return err
	}
	// Create the file first: a bundle that cannot be written must not be
	// recorded as exported.
	var file *os.File
	if opts.File != "" {
		if file, err = os.OpenFile(opts.File, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); errors.Is(err, fs.ErrExist) {
			// As every command's existing output file (resolve --report,
			// reconcile --emit-*, import --ambiguous): a usage error.
			return cmdutil.UsageErr("--file %s already exists: choose another file (an export is never overwritten)", opts.File)
		} else if err != nil {
			return cmdutil.FileErr("export: %w", err)
		}
		defer file.Close()
	}
	b, err := quarantine.Export(ctx, pool, opts.ID, opts.Operator)
	if err != nil {
		if file != nil {
			file.Close()
			os.Remove(opts.File)
		}
		return quarantineErr(err, cmdutil.ExitInvalid)
	}
	var out []byte
	if opts.JSON && file == nil {
		out, err = json.Marshal(b)
	} else {
		out, err = json.MarshalIndent(b, "", "  ")
	}
	if err != nil {
		return err
	}
	out = append(out, '\n')
	w := opts.IO.Out
	if file != nil {
		w = file
	}
	if _, err := w.Write(out); err != nil {
		return fmt.Errorf("write bundle: %w", err)
	}
	if file != nil {
		if err := file.Close(); err != nil {
			return fmt.Errorf("write bundle: %w", err)
		}
		fmt.Fprintf(opts.IO.ErrOut, "wrote %s (audit row %d)\n", opts.File, b.Audit.ID)
	}
	if !b.Verified {
		fmt.Fprintf(opts.IO.ErrOut, "warning: a recorded hash does not match its payload; see stored.problem and incoming.problem in the bundle\n")
	}
	return nil
}

// quarantineErr gives a quarantine error its exit code: unknown records get
// notFound, refused decisions ExitInvalid (nothing was written), an
// unacknowledged commit ExitFailure.
func quarantineErr(err error, notFound int) error {
	switch {
	case errors.Is(err, quarantine.ErrNotFound):
		return cmdutil.WithCode(notFound, err)
	case errors.Is(err, idem.ErrOutcomeUnknown):
		return cmdutil.WithCode(cmdutil.ExitFailure, err)
	case errors.Is(err, quarantine.ErrInvalidFilter):
		return cmdutil.WithCode(cmdutil.ExitUsage, err)
	case errors.Is(err, quarantine.ErrAlreadyDecided), errors.Is(err, quarantine.ErrDecisionInput),
		errors.Is(err, quarantine.ErrInvalidNewOperation), errors.Is(err, quarantine.ErrNewOperationConflict),
		errors.Is(err, quarantine.ErrCannotExecute), errors.Is(err, quarantine.ErrEvidenceImmutable),
		errors.Is(err, quarantine.ErrImportedFinished):
		return cmdutil.WithCode(cmdutil.ExitInvalid, err)
	}
	var effect interface{ SQLState() string }
	if errors.As(err, &effect) {
		// The effect or the database refused the operation: nothing written.
		return cmdutil.WithCode(cmdutil.ExitInvalid, err)
	}
	return err
}

// parseRecordID reads the ID argument ("42" or "#42").
func parseRecordID(args []string) (int64, error) {
	if len(args) != 1 {
		return 0, cmdutil.UsageErr("a quarantine record ID is required (idemctl quarantine list shows them)")
	}
	id, err := strconv.ParseInt(strings.TrimPrefix(args[0], "#"), 10, 64)
	if err != nil || id <= 0 {
		return 0, cmdutil.UsageErr("invalid quarantine record ID %q: want a positive number", args[0])
	}
	return id, nil
}

// confirmDecision shows a record's question on a terminal (unless yes) and
// ends the command with exit 1, nothing done, unless the answer is yes.
func confirmDecision(ctx context.Context, io *cmdutil.IOStreams, db idem.DBTX, id int64, yes bool, question func(quarantine.Record) string) error {
	if yes || !io.CanPrompt() {
		return nil
	}
	rec, err := quarantine.Show(ctx, db, id)
	if err != nil {
		return quarantineErr(err, cmdutil.ExitInvalid)
	}
	if err := decidedAlready(rec); err != nil {
		return err
	}
	if err := cmdutil.Confirm(io, false, question(rec), "nothing done"); err != nil {
		return err
	}
	return nil
}

// decidedAlready refuses, before any question, a record that is no longer
// open: the database would refuse the decision after the answer anyway.
func decidedAlready(rec quarantine.Record) error {
	if rec.Status == quarantine.StatusOpen {
		return nil
	}
	return cmdutil.WithCode(cmdutil.ExitInvalid, fmt.Errorf("record %d (%s/%s) is already %s: %w", rec.ID, rec.Tenant, rec.OperationID,
		rec.Status, quarantine.ErrAlreadyDecided))
}
