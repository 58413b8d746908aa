package quarantine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/audit"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/quarantine"
)

// QuarantineAcceptPlanOptions are the bulk flags of `idemctl quarantine
// accept-as-new`: what to accept, the rule, the cap.
type QuarantineAcceptPlanOptions struct {
	Selection quarantine.Selection
	Group     string
	Rule      string
	Max       int
	DryRun    bool
}

// acceptPlanFlags reads the bulk flags of accept-as-new.
type acceptPlanFlags struct {
	ff   quarantineFilterFlags
	opts QuarantineAcceptPlanOptions
}

func (a *acceptPlanFlags) add(cmd *cobra.Command) {
	a.ff.add(cmd.Flags())
	cmd.Flags().StringVar(&a.opts.Group, "group", "", "bulk: accept the open records of this group (idemctl quarantine groups)")
	cmd.Flags().StringVar(&a.opts.Rule, "rule", "", "bulk: the new operation id of each record, e.g. '{operation_id}-rev2'")
	cmd.Flags().IntVar(&a.opts.Max, "max", 0, fmt.Sprintf("bulk: refuse when more records match (1-%d, required)", quarantine.MaxAccept))
	cmd.Flags().BoolVar(&a.opts.DryRun, "dry-run", false, "bulk: print the preview and plan nothing")
}

// build reports whether the command line asks for a bulk accept, and checks it.
func (a *acceptPlanFlags) build(f *cmdutil.Factory, args []string) (bool, error) {
	filter, err := a.ff.build(f.Now())
	if err != nil {
		return true, err
	}
	stdin := len(args) == 1 && args[0] == "-"
	bulk := stdin || filter.Narrowed() || a.opts.Group != "" || a.opts.Rule != "" || a.opts.Max != 0 || a.opts.DryRun
	if !bulk {
		return false, nil
	}
	switch {
	case len(args) == 1 && !stdin:
		return true, cmdutil.UsageErr("a record ID excludes --group, filters, --rule and --max: accept one record with --new-operation-id")
	case stdin && (filter.Narrowed() || a.opts.Group != ""):
		return true, cmdutil.UsageErr("ids on stdin (-) exclude --group and filters: give one or the other")
	case !stdin && !filter.Narrowed() && a.opts.Group == "":
		return true, cmdutil.UsageErr("name what to accept: a record ID, - for ids on stdin, --group ID, or filters (see --help)")
	case a.opts.Group != "" && !quarantine.ValidGroupID(a.opts.Group):
		return true, cmdutil.UsageErr("--group %q: use an id printed by idemctl quarantine groups (g-1a2b3c4d5e6f)", a.opts.Group)
	}
	if err := quarantine.CheckRule(a.opts.Rule); err != nil {
		return true, cmdutil.UsageErr("--rule: %s", strings.TrimPrefix(err.Error(), quarantine.ErrBadPlan.Error()+": "))
	}
	if a.opts.Max < 1 || a.opts.Max > quarantine.MaxAccept {
		return true, cmdutil.UsageErr("--max is required for a bulk accept-as-new: the most records it may run (1-%d)", quarantine.MaxAccept)
	}
	if stdin {
		if a.opts.Selection.IDs, err = readRecordIDs(f.IO.In); err != nil {
			return true, err
		}
	} else {
		a.opts.Selection.Filter = filter
	}
	return true, nil
}

func quarantineAcceptPlanRun(ctx context.Context, opts *QuarantineAcceptOptions) error {
	pool, err := opts.f.Pool(ctx)
	if err != nil {
		return err
	}
	b := opts.Bulk
	sel := b.Selection
	if b.Group != "" {
		if sel.Filter, _, err = quarantine.ResolveGroup(ctx, pool, b.Group, sel.Filter); err != nil {
			return quarantineErr(err, cmdutil.ExitInvalid)
		}
	}
	preview, err := quarantine.PreviewBulk(ctx, pool, sel)
	if errors.Is(err, quarantine.ErrNothingToDecide) {
		fmt.Fprintf(opts.IO.ErrOut, "nothing to accept: %v\n", err)
		return nil
	}
	if err != nil {
		return quarantineErr(err, cmdutil.ExitInvalid)
	}
	printBulkPreview(opts.IO, preview, b.Group, "accept as new operations")
	fmt.Fprintf(opts.IO.ErrOut, "rule:   %s (e.g. ", b.Rule)
	for i, s := range preview.Sample {
		if i > 0 {
			fmt.Fprint(opts.IO.ErrOut, ", ")
		}
		fmt.Fprintf(opts.IO.ErrOut, "%s -> %s", s.OperationID, quarantine.NewOperationID(b.Rule, s.OperationID))
	}
	fmt.Fprintln(opts.IO.ErrOut, ")")
	if preview.Open > int64(b.Max) {
		return cmdutil.WithCode(cmdutil.ExitInvalid, fmt.Errorf("%s records match, over --max %d: narrow the selection or raise --max; nothing was planned",
			cmdutil.HumanCount(preview.Open), b.Max))
	}
	clashes, err := previewClashes(ctx, pool, sel, preview.MaxID, b.Rule, b.Max)
	if err != nil {
		return quarantineErr(err, cmdutil.ExitInvalid)
	}
	for _, c := range clashes {
		fmt.Fprintf(opts.IO.ErrOut, "cannot run: %s\n", c)
	}
	if b.DryRun {
		if len(clashes) == 0 {
			fmt.Fprintln(opts.IO.ErrOut, "dry run: nothing planned")
		}
		if opts.JSON {
			if err := cmdutil.PrintJSONLine(opts.IO.Out, map[string]any{"preview": preview, "rule": b.Rule, "dry_run": true, "clashes": clashes}); err != nil {
				return err
			}
		}
		if len(clashes) == 0 {
			return nil
		}
	}
	if len(clashes) > 0 {
		return cmdutil.WithCode(cmdutil.ExitInvalid, fmt.Errorf("%d of %s record(s) cannot run under %s: their new operation id is held by another payload; "+
			"choose another rule, or leave them out (ids on stdin: idemctl quarantine accept-as-new -); nothing was planned",
			len(clashes), cmdutil.HumanCount(preview.Open), b.Rule))
	}
	plan, err := quarantine.PlanAccept(ctx, pool, sel, preview.MaxID, b.Rule, b.Max, opts.Operator, opts.Reason)
	if err != nil {
		return bulkPlanErr(err)
	}
	review, err := quarantine.Review(ctx, pool, plan)
	if err != nil {
		return err
	}
	if opts.JSON {
		return cmdutil.PrintJSONLine(opts.IO.Out, review)
	}
	fmt.Fprintf(opts.IO.Out, "It will apply: %s\n", willApply(review))
	for _, p := range review.MoneyProblems {
		fmt.Fprintf(opts.IO.Out, "  %s\n", p)
	}
	_, err = fmt.Fprintf(opts.IO.Out, "Planned bulk accept-as-new %d: %d record(s), rule %s, by %s. Nothing runs until another person approves:\n"+
		"  idemctl quarantine bulk approve %d\nthen: idemctl quarantine bulk run %d\n",
		plan.ID, len(plan.IDs), plan.Rule, audit.Who(plan.PlannedPerson, plan.PlannedDBUser), plan.ID, plan.ID)
	return err
}

// previewClashes lists the records of a preview whose new operation id is
// held by another payload: the plan would be refused (the database checks
// again when it plans, and when the plan is approved).
func previewClashes(ctx context.Context, db idem.DBTX, sel quarantine.Selection, maxID int64, rule string, max int) ([]quarantine.Clash, error) {
	ids, err := quarantine.SelectIDs(ctx, db, sel, maxID, max)
	if err != nil {
		return nil, err
	}
	return quarantine.Clashes(ctx, db, ids, rule)
}

// bulkPlanErr gives a plan error its exit code: refusals (nothing written)
// are ExitInvalid.
func bulkPlanErr(err error) error {
	if errors.Is(err, quarantine.ErrPlanNotFound) {
		return cmdutil.WithCode(cmdutil.ExitNotFound, err)
	}
	for _, s := range []error{quarantine.ErrPlanState, quarantine.ErrSamePerson,
		quarantine.ErrBadPlan, quarantine.ErrNoPerson, quarantine.ErrNothingToDecide} {
		if errors.Is(err, s) {
			return cmdutil.WithCode(cmdutil.ExitInvalid, err)
		}
	}
	return quarantineErr(err, cmdutil.ExitInvalid)
}

// QuarantineBulkOptions are the flags of `idemctl quarantine bulk SUBCOMMAND PLAN`.
type QuarantineBulkOptions struct {
	IO       *cmdutil.IOStreams
	JSON     bool
	Action   string
	ID       int64
	Operator string
	Reason   string
	Batch    int
	Yes      bool
	f        *cmdutil.Factory
}

// NewCmdQuarantineBulk builds `idemctl quarantine bulk` (show, approve, run, abort).
func NewCmdQuarantineBulk(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bulk <command> PLAN",
		Short: "Approve, run, show or abort a bulk accept-as-new plan",
		Long: `A bulk accept-as-new (idemctl quarantine accept-as-new --group ... --rule ... --max ...)
runs effects, so it is a plan first: it fixes its records, the rule naming
each new operation and the reason, and runs nothing until another person
approves it (four-eyes: the database compares the persons behind the logins,
as for purges).

  show PLAN      the plan: state, rule, records, who planned and approved it
  approve PLAN   the second person's approval (exit 5 for the planner)
  run PLAN       run an approved plan in batches, each record once, with its
                 own audit row; Ctrl-C stops between batches, run again to resume
  abort PLAN     stop a plan; what already ran stays (--reason)`,
		Example: `  idemctl quarantine bulk show 3
  idemctl quarantine bulk approve 3            # as another person
  idemctl quarantine bulk run 3 --yes
  idemctl quarantine bulk abort 3 --reason "wrong rule"`,
	}
	for _, action := range []string{"show", "approve", "run", "abort"} {
		cmd.AddCommand(NewCmdQuarantineBulkAction(f, action, nil))
	}
	return cmd
}

// NewCmdQuarantineBulkAction builds one subcommand of `idemctl quarantine bulk`.
func NewCmdQuarantineBulkAction(f *cmdutil.Factory, action string, runF func(*QuarantineBulkOptions) error) *cobra.Command {
	opts := &QuarantineBulkOptions{IO: f.IO, f: f, Action: action}
	short := map[string]string{
		"show": "Show a bulk accept-as-new plan", "approve": "Approve another person's bulk accept-as-new plan (four-eyes)",
		"run": "Run an approved bulk accept-as-new plan", "abort": "Abort a bulk accept-as-new plan",
	}[action]
	cmd := &cobra.Command{
		Use:     action + " PLAN",
		Short:   short,
		Long:    short + ".\n\n" + strings.TrimSuffix(bulkActionHelp[action], "\n\n"),
		Example: "  idemctl quarantine bulk " + action + " 3",
		Args:    cmdutil.MaxArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return cmdutil.UsageErr("a plan id is required (idemctl quarantine accept-as-new --rule ... prints it)")
			}
			id, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil || id <= 0 {
				return cmdutil.UsageErr("invalid plan id %q: want a positive number", args[0])
			}
			if action == "abort" && strings.TrimSpace(opts.Reason) == "" {
				return cmdutil.UsageErr("--reason is required: say why, for the record")
			}
			if action == "run" && (opts.Batch < 1 || opts.Batch > quarantine.MaxBatch) {
				return cmdutil.UsageErr("--batch must be between 1 and %d", quarantine.MaxBatch)
			}
			if action == "run" || action == "approve" {
				if err := cmdutil.NeedYes(f.IO, opts.Yes, action+" lets the payloads run as new operations"); err != nil {
					return err
				}
			}
			opts.ID, opts.Operator, opts.JSON = id, f.Operator(), f.JSON()
			if runF != nil {
				return runF(opts)
			}
			return quarantineBulkRun(cmd.Context(), opts)
		},
	}
	switch action {
	case "abort":
		cmd.Flags().StringVar(&opts.Reason, "reason", "", "why (required; recorded)")
	case "run":
		cmd.Flags().IntVar(&opts.Batch, "batch", quarantine.DefaultBatch, "records run per transaction")
		cmd.Flags().BoolVarP(&opts.Yes, "yes", "y", false, "do not ask for confirmation on a terminal")
	case "approve":
		cmd.Flags().BoolVarP(&opts.Yes, "yes", "y", false, "do not ask for confirmation on a terminal")
	}
	return cmd
}

func quarantineBulkRun(ctx context.Context, opts *QuarantineBulkOptions) error {
	pool, err := opts.f.Pool(ctx)
	if err != nil {
		return err
	}
	var plan quarantine.AcceptPlan
	switch opts.Action {
	case "approve":
		if !opts.Yes {
			shown, err := quarantine.ReviewAccept(ctx, pool, opts.ID)
			if err != nil {
				return bulkPlanErr(err)
			}
			if err := printAcceptReview(opts.IO.ErrOut, shown, cmdutil.PromptRecords); err != nil {
				return err
			}
			if err := cmdutil.Confirm(opts.IO, false, fmt.Sprintf("Approve plan %d: %d record(s) to run as new operations (%s)%s?",
				shown.ID, len(shown.IDs), shown.Rule, applyingClause(shown)), "nothing done"); err != nil {
				return err
			}
		}
		plan, err = quarantine.ApproveAccept(ctx, pool, opts.ID, opts.Operator)
	case "abort":
		plan, err = quarantine.AbortAccept(ctx, pool, opts.ID, opts.Operator, opts.Reason)
	case "run":
		return quarantineBulkAcceptRun(ctx, opts)
	default:
		plan, err = quarantine.ShowAccept(ctx, pool, opts.ID)
	}
	if err != nil {
		return bulkPlanErr(err)
	}
	review, err := quarantine.Review(ctx, pool, plan)
	if err != nil {
		return err
	}
	if opts.JSON {
		return cmdutil.PrintJSONLine(opts.IO.Out, review)
	}
	records := 0 // approve and abort: the plan and its totals; show: every record
	if opts.Action == "show" {
		records = -1
	}
	return printAcceptReview(opts.IO.Out, review, records)
}

// bulkActionHelp is what each bulk subcommand's help adds.
var bulkActionHelp = map[string]string{
	"approve": "On a terminal it shows the plan and asks first; --yes skips the question\nand is required without one.\n\n",
	"run":     "On a terminal it asks first; --yes skips the question and is required\nwithout one.\n\n",
}

// printAcceptReview prints an accept-as-new plan as a table: its state,
// rule, persons, and what its run applies (the totals per currency of its
// money records, and the records whose amount cannot be read); then, for
// records > 0 the first records records (-1: all), each with what it runs
// under and its changed fields.
func printAcceptReview(w io.Writer, r quarantine.AcceptReview, records int) error {
	plan := r.AcceptPlan
	rows := [][]string{
		{"plan", strconv.FormatInt(plan.ID, 10)}, {"state", plan.State}, {"rule", plan.Rule},
		{"records", fmt.Sprintf("%d (cap %d), ids %s", len(plan.IDs), plan.Max, idList(plan.IDs, 20))},
		{"reason", plan.Reason},
		{"planned", fmt.Sprintf("by %s at %s", audit.Who(plan.PlannedPerson, plan.PlannedDBUser), cmdutil.FormatStamp(plan.PlannedAt))},
		{"approved", approvedWhen(plan)},
		{"progress", fmt.Sprintf("%d accepted, %d skipped, through id %d", plan.Accepted, plan.Skipped, plan.DoneThrough)},
	}
	if plan.AbortReason != "" {
		rows = append(rows, []string{"aborted", plan.AbortReason})
	}
	rows = append(rows, []string{"will apply", willApply(r)})
	for _, p := range r.MoneyProblems {
		rows = append(rows, []string{"not in totals", p.String()})
	}
	for _, c := range r.Clashes {
		rows = append(rows, []string{"CANNOT RUN", c.String()})
	}
	if err := cmdutil.PrintTable(w, []string{"field", "value"}, rows); err != nil {
		return err
	}
	if records == 0 || len(r.Records) == 0 {
		return nil
	}
	shown := r.Records
	if records > 0 && len(shown) > records {
		shown = shown[:records]
	}
	fmt.Fprintf(w, "\nWhat each record runs (%d of %d; pointer: stored -> incoming):\n", len(shown), len(r.Records))
	table := make([][]string, 0, len(shown))
	for _, it := range shown {
		runsAs := it.NewOperationID
		if it.CannotRun != "" {
			runsAs += " (CANNOT RUN: id held)"
		}
		table = append(table, []string{strconv.FormatInt(it.ID, 10), it.Tenant, it.OperationID, runsAs, it.Summary(60)})
	}
	if err := cmdutil.PrintTable(w, []string{"record", "tenant", "operation", "runs as", "changed"}, table); err != nil {
		return err
	}
	if len(shown) < len(r.Records) {
		_, err := fmt.Fprintf(w, "and %d more: idemctl quarantine bulk show %d lists them all (-o json too)\n", len(r.Records)-len(shown), plan.ID)
		return err
	}
	return nil
}

// willApply says what the run applies: the money totals per currency of
// the open records ("EUR 1,234.50 over 12 records"), or that none moves
// money.
func willApply(r quarantine.AcceptReview) string {
	parts := make([]string, 0, len(r.Totals)+1)
	for _, t := range r.Totals {
		parts = append(parts, t.String())
	}
	money := 0
	for _, it := range r.Records {
		if it.Money && it.Status == quarantine.StatusOpen {
			money++
		}
	}
	switch {
	case money == 0:
		return fmt.Sprintf("%d open record(s), none of a money class", r.Open) + cannotRunClause(r)
	case len(r.MoneyProblems) > 0:
		parts = append(parts, fmt.Sprintf("%d money record(s) not in the totals (below)", len(r.MoneyProblems)))
	}
	if money < r.Open {
		parts = append(parts, fmt.Sprintf("and %d record(s) of classes that move no money", r.Open-money))
	}
	return strings.Join(parts, "; ") + cannotRunClause(r)
}

// cannotRunClause warns that a run stops at a record whose new id another
// payload holds: "; but 1 record(s) CANNOT RUN (new id held): ...".
func cannotRunClause(r quarantine.AcceptReview) string {
	if len(r.Clashes) == 0 {
		return ""
	}
	return fmt.Sprintf("; but %d record(s) CANNOT RUN, their new id is held by another payload: the run stops there (abort and plan again without them)", len(r.Clashes))
}

// applyingClause is the approval question's money part: ", applying EUR
// 1,234.50 over 12 records", or nothing when no record moves money.
func applyingClause(r quarantine.AcceptReview) string {
	if len(r.Totals) == 0 && len(r.MoneyProblems) == 0 && len(r.Clashes) == 0 {
		return ""
	}
	return ", applying " + willApply(r)
}

// approvedWhen says who approved a bulk plan and when ("-": not yet).
func approvedWhen(plan quarantine.AcceptPlan) string {
	if plan.ApprovedAt == nil {
		return "-"
	}
	return fmt.Sprintf("by %s at %s", audit.Who(plan.ApprovedPerson, plan.ApprovedDBUser), cmdutil.FormatStamp(*plan.ApprovedAt))
}

func quarantineBulkAcceptRun(ctx context.Context, opts *QuarantineBulkOptions) error {
	pool, err := opts.f.Pool(ctx)
	if err != nil {
		return err
	}
	review, err := quarantine.ReviewAccept(ctx, pool, opts.ID)
	if err != nil {
		return bulkPlanErr(err)
	}
	plan := review.AcceptPlan
	if err := cmdutil.Confirm(opts.IO, opts.Yes, fmt.Sprintf("Run %d record(s) of plan %d as new operations (%s)%s, approved by %s?",
		len(plan.IDs), plan.ID, plan.Rule, applyingClause(review), audit.Who(plan.ApprovedPerson, plan.ApprovedDBUser)), "nothing done"); err != nil {
		return err
	}
	res, err := quarantine.RunAccept(ctx, pool, opts.ID, opts.Operator, opts.Batch, func(r quarantine.BulkResult) {
		fmt.Fprintf(opts.IO.ErrOut, "accepted %s of %s (%s skipped, %d batch(es))\n",
			cmdutil.HumanCount(r.Decided), cmdutil.HumanCount(int64(len(plan.IDs)-plan.Accepted-plan.Skipped)), cmdutil.HumanCount(r.Skipped), r.Batches)
	})
	if opts.JSON {
		if jerr := cmdutil.PrintJSONLine(opts.IO.Out, res); jerr != nil && err == nil {
			err = jerr
		}
	} else {
		printRunSummary(opts.IO.Out, opts.ID, res, err)
	}
	if err != nil {
		return bulkPlanErr(err)
	}
	if res.Interrupted {
		fmt.Fprintf(opts.IO.ErrOut, "interrupted after %s, all committed; resume: idemctl quarantine bulk run %d\n", cmdutil.HumanCount(res.Decided), opts.ID)
		return cmdutil.SilentExit{Code: cmdutil.ExitFailure}
	}
	return nil
}

// printRunSummary says what a bulk run did: what ran and its audit rows; a
// run that failed says what committed before it failed (the failing batch
// rolled back whole), and nothing about audit rows it did not write.
func printRunSummary(w io.Writer, plan int64, res quarantine.BulkResult, err error) {
	audit := ""
	if res.FirstAudit != 0 {
		audit = fmt.Sprintf("; audit rows %d-%d", res.FirstAudit, res.LastAudit)
	}
	switch {
	case err == nil:
		fmt.Fprintf(w, "Plan %d: %s record(s) ran as new operations (%s already decided, skipped)%s.\n",
			plan, cmdutil.HumanCount(res.Decided), cmdutil.HumanCount(res.Skipped), audit)
	case res.Decided+res.Skipped > 0:
		fmt.Fprintf(w, "Plan %d stopped: %s record(s) ran in the batches committed before the failure (%s skipped)%s; the failing batch ran nothing.\n",
			plan, cmdutil.HumanCount(res.Decided), cmdutil.HumanCount(res.Skipped), audit)
	}
}

// idList lists ids whole, the first n of them, and says how many more.
func idList(ids []int64, n int) string {
	parts := make([]string, 0, min(len(ids), n)+1)
	for i, id := range ids {
		if i == n {
			parts = append(parts, fmt.Sprintf("and %d more (-o json lists them)", len(ids)-n))
			break
		}
		parts = append(parts, strconv.FormatInt(id, 10))
	}
	return strings.Join(parts, " ")
}
