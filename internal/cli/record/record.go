// Package record holds `idemctl record` (plan, list, show, approve, run):
// outcomes known from outside recorded by hand, with a second person;
// `import` shares its approve and run step.
package record

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/audit"
	"github.com/idemctl/idemctl/governance"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
)

// NewCmdRecord builds `idemctl record` (plan, list, show, approve, run): outcomes known
// from outside, recorded by hand through a four-eyes entry plan.
func NewCmdRecord(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "record <command>",
		Short: "Record outcomes known from outside, by hand, with a second person (plan, list, show, approve, run)",
		Long: `Record an outcome that happened outside (a charge the provider made that the
service never recorded): each identity enters the inbox with its payload and a
response in the service's own shape, marked as recorded by hand, and its effect
is NOT run; a later retry of it answers already_applied, not a second charge.

One person plans from a file (one JSON object a line: tenant_id, operation_id,
class, payload, response, evidence such as the provider's reference; idemctl
reconcile --emit-record writes one from a report's missing_in_inbox lines), another
person approves, then it runs. The plan keeps the file's sha256, the counts
and a sample. A money class needs --contract; a class with a SQL effect needs
--correction too (its ledger rows are not written by recording: say who writes
them). An identity the inbox already holds does not enter: with the same
payload it is left alone ("exists"), with another payload the conflict is
quarantined with both sides ("quarantined", as an import's is); the approval
names them (held) and leaves their amounts out of what it records. One with
a pending claim or an open quarantine record is refused. idemctl inspect (and --history) shows where an identity came from.

list and show (and the approval's question) show each plan's identities with
their evidence and, for money classes, the totals per currency it records
(EUR 1,234.50 over 12 records), read from the payloads by the class's money
declaration; an item whose amount cannot be read is named.`,
		Example: `  idemctl record plan --file charges.ndjson --reason "PSP charged, never recorded (INC-9)" \
      --contract PSP-2024-7 --correction "ledger correction LC-12 by finance ops"
  idemctl record list
  idemctl record show 3
  idemctl record approve 3     # another person
  idemctl record run 3`,
	}
	cmd.AddCommand(newCmdRecordPlan(f), newCmdRecordList(f), newCmdRecordShow(f), newCmdRecordStep(f, "approve"),
		newCmdRecordStep(f, "run"), NewCmdEntryAbort(f, "record", func(p governance.EntryPlan) error {
			if f.JSON() {
				return cmdutil.PrintJSONLine(f.IO.Out, p)
			}
			return PrintEntryReview(f.IO.Out, governance.EntryReview{EntryPlan: p}, 0)
		}))
	return cmd
}

type recordLine struct {
	TenantID    string          `json:"tenant_id"`
	OperationID string          `json:"operation_id"`
	Class       string          `json:"class"`
	Payload     json.RawMessage `json:"payload"`
	Response    json.RawMessage `json:"response"`
	Evidence    string          `json:"evidence"`
	// Note is for the person who reads the file (reconcile --emit-record
	// writes one); it is not planned.
	Note string `json:"note"`
}

// recordFields are the fields of a line of a record plan's file.
const recordFields = "tenant_id, operation_id, class, payload, response, evidence, note"

// parseRecordLine reads one line of a record plan's file: a field it does
// not know is refused (resolve's "tenant" here entered nothing and failed
// later with a SQL error and no line), and so is a line without its
// identity.
func parseRecordLine(raw []byte) (recordLine, error) {
	var l recordLine
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return l, fmt.Errorf("unknown field %s (want %s)", field, recordFields)
		}
		return l, err
	}
	if dec.More() {
		return l, fmt.Errorf("more than one JSON value on the line")
	}
	switch {
	case l.TenantID == "":
		return l, fmt.Errorf("tenant_id is required (want %s)", recordFields)
	case l.OperationID == "":
		return l, fmt.Errorf("operation_id is required (want %s)", recordFields)
	case len(bytes.TrimSpace(l.Response)) == 0 || string(bytes.TrimSpace(l.Response)) == "null":
		// A null response recorded would answer every retry already_applied
		// with nothing: the outcome is not known, it is resolved instead.
		return l, fmt.Errorf("response is required, and JSON null is none: the service's saved response for %s/%s (an outcome not known is resolved: idemctl resolve)",
			l.TenantID, l.OperationID)
	}
	return l, nil
}

// readRecordFile reads the items of a record plan and the file's digest.
func readRecordFile(path string) ([]governance.EntryItem, string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, "", cmdutil.FileErr("--file: %w", err)
	}
	var items []governance.EntryItem
	lineOf := map[idem.Identity]int{} // an identity twice is refused by the plan's key: name both lines first
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 64*1024), 4<<20)
	for n := 1; sc.Scan(); n++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		l, err := parseRecordLine(sc.Bytes())
		if err != nil {
			return nil, "", cmdutil.WithCode(cmdutil.ExitInvalid, fmt.Errorf("%s line %d: %v; nothing planned", path, n, err))
		}
		id := idem.Identity{TenantID: l.TenantID, OperationID: l.OperationID}
		if first, twice := lineOf[id]; twice {
			return nil, "", cmdutil.WithCode(cmdutil.ExitInvalid, fmt.Errorf("%s line %d: %s/%s is on line %d too (a plan holds an identity once); nothing planned",
				path, n, l.TenantID, l.OperationID, first))
		}
		lineOf[id] = n
		canon, hash, err := idem.Canonicalize(l.Payload, idem.PayloadLimits{})
		if err != nil {
			return nil, "", cmdutil.WithCode(cmdutil.ExitInvalid, fmt.Errorf("%s line %d: payload: %v; nothing planned", path, n, err))
		}
		items = append(items, governance.EntryItem{TenantID: l.TenantID, OperationID: l.OperationID, Class: l.Class,
			Payload: string(canon), PayloadHash: hash, Response: l.Response, Evidence: l.Evidence})
	}
	if err := sc.Err(); err != nil {
		return nil, "", cmdutil.WithCode(cmdutil.ExitInvalid, fmt.Errorf("%s: %v", path, err))
	}
	return items, governance.DigestOf(raw), nil
}

func newCmdRecordPlan(f *cmdutil.Factory) *cobra.Command {
	var file string
	var o governance.EntryOptions
	cmd := &cobra.Command{
		Use:   "plan --file FILE --reason TEXT [--contract REF] [--correction REF]",
		Short: "Plan recording outcomes known from outside; nothing enters until another person approves",
		Long: `Plan recording the identities of FILE, one JSON object a line with the fields
tenant_id, operation_id, class, payload, response, evidence and note (for the
reader, not planned; reconcile --emit-record writes such files); any other
field, a line without its identity or its response (JSON null is none: an
outcome not known is resolved, not recorded), or an identity on two lines,
is refused with its line number (exit code 5) and nothing is planned.
Nothing enters until another person approves.`,
		Example: `  idemctl record plan --file charges.ndjson --reason "PSP charged, never recorded (INC-9)" \
      --contract PSP-2024-7 --correction "ledger correction LC-12 by finance ops"`,
		Args: cmdutil.MaxArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if file == "" || o.Reason == "" {
				return cmdutil.UsageErr("--file and --reason are required")
			}
			items, digest, err := readRecordFile(file)
			if err != nil {
				return err
			}
			pool, err := f.Pool(cmd.Context())
			if err != nil {
				return err
			}
			o.Kind, o.Source, o.SourceDigest, o.Operator = governance.EntryRecord, file, digest, f.Operator()
			p, err := governance.PlanEntry(cmd.Context(), pool, o, items)
			if err != nil {
				return cmdutil.GovernanceErr(err)
			}
			if err := showEntry(cmd.Context(), f, pool, p, 0); err != nil {
				return err
			}
			fmt.Fprintf(f.IO.ErrOut, "nothing entered yet: another person approves it with idemctl record approve %d\n", p.ID)
			return nil
		},
	}
	cmd.Flags().StringVar(&file, "file", "", "the outcomes, one JSON object a line")
	cmd.Flags().StringVar(&o.Reason, "reason", "", "why (required)")
	cmd.Flags().StringVar(&o.Contract, "contract", "", "business contract reference (required for a money class)")
	cmd.Flags().StringVar(&o.Correction, "correction", "", "the manual correction that writes the ledger rows (required for a class with a SQL effect)")
	return cmd
}

func newCmdRecordStep(f *cmdutil.Factory, step string) *cobra.Command {
	short := map[string]string{
		"approve": "Approve a record plan another person made (four eyes)",
		"run":     "Enter an approved record plan's identities, without running their effects",
	}[step]
	long := short + "."
	if step == "approve" {
		long += "\n\nOn a terminal it shows the plan (its identities, evidence and money totals)\nand asks first; --yes skips the question and is required without one."
	}
	var yes bool
	cmd := &cobra.Command{
		Use:     step + " ID",
		Short:   short,
		Long:    long,
		Example: "  idemctl record " + step + " 3",
		Args:    cmdutil.MaxArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := cmdutil.ParseID(args, "a record plan")
			if err != nil {
				return err
			}
			p, pool, err := EntryStep(cmd.Context(), f, governance.EntryRecord, step, id, yes, func(ctx context.Context, db *pgxpool.Pool) (governance.EntryPlan, error) {
				if step == "approve" {
					return governance.ApproveEntry(ctx, db, id, f.Operator())
				}
				return governance.RunEntry(ctx, db, id, f.Operator())
			})
			if err != nil {
				return err
			}
			items := 0
			if step == "run" && p.LeftAlone > 0 {
				items = -1 // each identity's outcome: which did not enter, and why
			}
			if err := showEntry(cmd.Context(), f, pool, p, items); err != nil || step != "run" || p.LeftAlone == 0 {
				return err
			}
			return RunConflictExit(cmd.Context(), pool, p.ID)
		},
	}
	if step == "approve" {
		cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation on a terminal")
	}
	return cmd
}

// RunConflictExit is the exit of a run of entry plan id that quarantined
// a row (the inbox holds its identity with another request): 3, at least
// one conflict, as every command says it; nil otherwise.
func RunConflictExit(ctx context.Context, pool *pgxpool.Pool, id int64) error {
	n, err := governance.EntryConflicts(ctx, pool, id)
	if err != nil {
		return cmdutil.GovernanceErr(err)
	}
	if n > 0 {
		return cmdutil.SilentExit{Code: cmdutil.ExitConflict}
	}
	return nil
}

// EntryStep approves (step "approve") or runs an entry plan of kind kind
// (record or import) with act, the kind's own step: a plan of the other
// kind is refused first (governance.KindError: exit 5, naming the command
// to use), an approval needs --yes without a terminal, and on one shows
// the plan and asks first. It returns the plan as the step left it and the
// pool it used.
func EntryStep(ctx context.Context, f *cmdutil.Factory, kind, step string, id int64, yes bool,
	act func(context.Context, *pgxpool.Pool) (governance.EntryPlan, error)) (governance.EntryPlan, *pgxpool.Pool, error) {
	if step == "approve" {
		if err := cmdutil.NeedYes(f.IO, yes, "approve lets identities enter without their effect"); err != nil {
			return governance.EntryPlan{}, nil, err
		}
	}
	pool, err := f.Pool(ctx)
	if err != nil {
		return governance.EntryPlan{}, nil, err
	}
	if err := governance.CheckEntryKind(ctx, pool, id, kind, step); err != nil {
		return governance.EntryPlan{}, pool, cmdutil.GovernanceErr(err)
	}
	if step == "approve" && !yes {
		if err := confirmEntry(ctx, f, pool, id); err != nil {
			return governance.EntryPlan{}, pool, err
		}
	}
	if step == "run" {
		if p, ran := ranBefore(ctx, f, pool, id); ran {
			return p, pool, nil
		}
	}
	p, err := act(ctx, pool)
	if err != nil {
		if step == "run" {
			// a run of the same plan that finished while this one waited
			// for the plan's lock
			if p, ran := ranBefore(ctx, f, pool, id); ran {
				return p, pool, nil
			}
		}
		return p, pool, cmdutil.GovernanceErr(err)
	}
	return p, pool, nil
}

// ranBefore: entry plan id already ran (its state done), by this command
// or another at the same time. A run is idempotent: it says so on stderr
// and the caller shows what that run entered, with its exit (0, or 3 when
// it left a conflict), rather than failing on a plan no longer approved.
func ranBefore(ctx context.Context, f *cmdutil.Factory, db governance.DBTX, id int64) (governance.EntryPlan, bool) {
	p, err := governance.LoadEntry(ctx, db, id)
	if err != nil || p.State != "done" {
		return p, false
	}
	fmt.Fprintf(f.IO.ErrOut, "%s plan %d already ran: nothing entered now; what its run did:\n", p.Kind, id)
	return p, true
}

// confirmEntry shows an entry plan on the terminal and asks whether to
// approve it; no ends the command with exit 1, nothing done.
func confirmEntry(ctx context.Context, f *cmdutil.Factory, db governance.DBTX, id int64) error {
	r, err := governance.ShowEntry(ctx, db, id)
	if err != nil {
		return cmdutil.GovernanceErr(governance.MapError(err)) // a service's login: the role approving needs
	}
	if err := PrintEntryReview(f.IO.ErrOut, r, cmdutil.PromptRecords); err != nil {
		return err
	}
	money := ""
	if len(r.Totals) > 0 || len(r.MoneyProblems) > 0 {
		money = ", recording " + entryTotals(r)
	}
	held := heldNow(r)
	if err := cmdutil.Confirm(f.IO, false, fmt.Sprintf("Approve entry plan %d: %d identit(ies) enter without their effect%s%s?",
		r.ID, r.Items-len(held), money, heldClause(held)), "nothing done"); err != nil {
		return err
	}
	return nil
}

// heldNow lists the plan's identities the inbox already holds (before its
// run): they do not enter, and their amounts are not in what it records.
func heldNow(r governance.EntryReview) []governance.EntryLine {
	var held []governance.EntryLine
	for _, e := range r.Entries {
		if e.Held != "" {
			held = append(held, e)
		}
	}
	return held
}

// heldClause names the identities the inbox already holds, whole, and what
// the run does with each: "; already in the inbox, not entered: t1/ext-1
// (another payload: quarantined at the run)". The first 5; then how many
// more, and where they are listed.
func heldClause(held []governance.EntryLine) string {
	if len(held) == 0 {
		return ""
	}
	parts := make([]string, 0, 6)
	for i, e := range held {
		if i == 5 {
			parts = append(parts, fmt.Sprintf("and %d more (the table's held column)", len(held)-5))
			break
		}
		parts = append(parts, e.TenantID+"/"+e.OperationID+" ("+heldFate(e.Held)+")")
	}
	return "; already in the inbox, not entered: " + strings.Join(parts, ", ")
}

func heldFate(held string) string {
	if held == "another payload" {
		return "another payload: quarantined at the run"
	}
	return "same payload: left alone"
}

func newCmdRecordList(f *cmdutil.Factory) *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:   "list [--limit N]",
		Short: "List record (and import) plans, newest first, with their money totals",
		Long: `List the plans of identities that enter without their effect (recorded by
hand, imported), newest first: state, the persons, the items and, for money
classes, the totals per currency each records.`,
		Example: `  idemctl record list
  idemctl record list --limit 5 -o json`,
		Args: cmdutil.MaxArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 1 || limit > 1000 {
				return cmdutil.UsageErr("--limit must be between 1 and 1000")
			}
			pool, err := f.Pool(cmd.Context())
			if err != nil {
				return err
			}
			rs, err := governance.ListEntries(cmd.Context(), pool, limit)
			if err != nil {
				return cmdutil.GovernanceErr(err)
			}
			if f.JSON() {
				for _, r := range rs {
					if err := cmdutil.PrintJSONLine(f.IO.Out, r); err != nil {
						return err
					}
				}
				return nil
			}
			if len(rs) == 0 {
				fmt.Fprintln(f.IO.ErrOut, "no record plans")
				return nil
			}
			rows := make([][]string, 0, len(rs))
			for _, r := range rs {
				rows = append(rows, []string{strconv.FormatInt(r.ID, 10), r.Kind, r.State, strconv.Itoa(r.Items),
					audit.Who(r.PlannedPerson, r.PlannedDBUser), audit.Who(cmdutil.Deref(r.ApprovedPerson), cmdutil.Deref(r.ApprovedDBUser)),
					entryTotals(r), r.Reason})
			}
			return cmdutil.PrintTable(f.IO.Out, []string{"plan", "kind", "state", "items", "planned by", "approved by", "totals", "reason"}, rows)
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 20, "the newest plans listed (1-1000)")
	return cmd
}

func newCmdRecordShow(f *cmdutil.Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "show ID",
		Short: "Show a record plan: its identities, evidence and money totals",
		Long: `Show a plan of identities that enter without their effect: who planned and
approved it, each identity with its class, evidence and amount, and for
money classes the totals per currency it records. Of an import plan (whose
rows are not listed: a store's whole history), the rows that did not enter
with their outcomes (skipped, quarantined, refused, conflict_hash_only; the
first 1000, and how many).`,
		Example: `  idemctl record show 3
  idemctl record show 3 -o json`,
		Args: cmdutil.MaxArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := cmdutil.ParseID(args, "a record plan")
			if err != nil {
				return err
			}
			pool, err := f.Pool(cmd.Context())
			if err != nil {
				return err
			}
			r, err := governance.ShowEntry(cmd.Context(), pool, id)
			if err != nil {
				return cmdutil.GovernanceErr(err)
			}
			if f.JSON() {
				return cmdutil.PrintJSONLine(f.IO.Out, r)
			}
			return PrintEntryReview(f.IO.Out, r, -1)
		},
	}
}
