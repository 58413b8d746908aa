// Package change holds `idemctl change` (list, show, approve, abort): the
// governed changes that need a second person, reviewed and decided.
package change

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/audit"
	"github.com/idemctl/idemctl/governance"
	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
)

// NewCmdChange builds `idemctl change` (list, show, approve, abort): the
// governed changes that need a second person.
func NewCmdChange(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "change <command>",
		Short: "Governed changes a second person approves (list, show, approve, abort)",
		Long: `Some changes weaken a proof or switch four eyes off: changing or removing a
class's money declaration (idemctl class set --money), making a forever class
horizon (idemctl class set --retention horizon), removing a replay source
(idemctl horizon source remove) and marking a manual correction applied, which
stops it pinning its identity (idemctl corrections done). One person plans such a change,
another person approves it, and the approval applies it. The database compares
persons (idemctl person), not logins or --operator labels. A change whose
target changed since it was planned is refused: abort it and plan again.`,
		Example: `  idemctl change list
  idemctl change show 4
  idemctl change approve 4
  idemctl change abort 4 --reason "wrong class"`,
	}
	cmd.AddCommand(newCmdChangeList(f), newCmdChangeShow(f), newCmdChangeApprove(f), newCmdChangeAbort(f))
	return cmd
}

func newCmdChangeList(f *cmdutil.Factory) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "list [--all]",
		Short: "List governed changes waiting for a second person (--all: every one)",
		Long:  `List governed changes, newest first: the planned ones, or every one with --all.`,
		Example: `  idemctl change list
  idemctl change list --all -o json`,
		Args: cmdutil.MaxArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			pool, err := f.Pool(cmd.Context())
			if err != nil {
				return err
			}
			cs, err := governance.ListChanges(cmd.Context(), pool, all)
			if err != nil {
				return readErr(err)
			}
			return printChanges(f, cs)
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "every change, approved and aborted ones too")
	return cmd
}

func printChanges(f *cmdutil.Factory, cs []governance.Change) error {
	if f.JSON() {
		for _, c := range cs {
			if err := cmdutil.PrintJSONLine(f.IO.Out, c); err != nil {
				return err
			}
		}
		return nil
	}
	if len(cs) == 0 {
		fmt.Fprintln(f.IO.ErrOut, "no governed changes")
		return nil
	}
	rows := make([][]string, 0, len(cs))
	for _, c := range cs {
		rows = append(rows, []string{strconv.FormatInt(c.ID, 10), c.Kind, c.Target, c.State,
			audit.Who(c.PlannedPerson, c.PlannedDBUser), audit.Who(cmdutil.Deref(c.ApprovedPerson), cmdutil.Deref(c.ApprovedDBUser)),
			changeSummary(c)})
	}
	return cmdutil.PrintTable(f.IO.Out, []string{"id", "kind", "target", "state", "planned by", "approved by", "change"}, rows)
}

func changeSummary(c governance.Change) string {
	switch c.Kind {
	case governance.KindSourceRemove:
		return "remove source " + c.Target
	case governance.KindClassRetention, governance.KindClassMinAge:
		return classPolicy(c.Before) + " -> " + classPolicy(c.After)
	case governance.KindCorrectionDone:
		return "correction " + c.Target + " applied: it stops pinning"
	}
	return "money " + jsonOrNone(c.Before) + " -> " + jsonOrNone(c.After)
}

// classPolicy renders a class change's side ({"retention", "min_age_seconds"})
// as an operator types it: "retention horizon, min age 1d".
func classPolicy(b []byte) string {
	var p struct {
		Retention string   `json:"retention"`
		MinAgeSec *float64 `json:"min_age_seconds"`
	}
	if err := json.Unmarshal(b, &p); err != nil || p.Retention == "" {
		return jsonOrNone(b)
	}
	age := "none"
	if p.MinAgeSec != nil && *p.MinAgeSec > 0 {
		age = horizon.FormatAge(time.Duration(*p.MinAgeSec * float64(time.Second)))
	}
	return "retention " + p.Retention + ", min age " + age
}

// changeSide is one side of a change as show prints it: a class's policy
// readable, anything else as its JSON.
func changeSide(c governance.Change, b []byte) string {
	if c.Kind == governance.KindClassRetention || c.Kind == governance.KindClassMinAge {
		return classPolicy(b)
	}
	return jsonOrNone(b)
}

func jsonOrNone(b []byte) string {
	if len(b) == 0 || string(b) == "null" {
		return "none"
	}
	return string(b)
}

func newCmdChangeShow(f *cmdutil.Factory) *cobra.Command {
	return &cobra.Command{
		Use:     "show ID",
		Short:   "Show one governed change: what it changes, who planned it, why",
		Long:    `Show one governed change with its target before and after, its reason and its persons.`,
		Example: `  idemctl change show 4`,
		Args:    cmdutil.MaxArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := cmdutil.ParseID(args, "a change")
			if err != nil {
				return err
			}
			pool, err := f.Pool(cmd.Context())
			if err != nil {
				return err
			}
			c, err := governance.GetChange(cmd.Context(), pool, id)
			if err != nil {
				return readErr(err)
			}
			return showChange(f, c)
		},
	}
}

func showChange(f *cmdutil.Factory, c governance.Change) error {
	if f.JSON() {
		return cmdutil.PrintJSONLine(f.IO.Out, c)
	}
	printChange(f.IO.Out, c)
	return nil
}

func printChange(w io.Writer, c governance.Change) {
	fmt.Fprintf(w, "change %d: %s %s (%s)\n", c.ID, c.Kind, c.Target, c.State)
	fmt.Fprintf(w, "  before:   %s\n  after:    %s\n", changeSide(c, c.Before), changeSide(c, c.After))
	fmt.Fprintf(w, "  reason:   %s\n", c.Reason)
	fmt.Fprintf(w, "  planned:  %s at %s\n", audit.Who(c.PlannedPerson, c.PlannedDBUser), c.PlannedAt.UTC().Format("2006-01-02 15:04:05Z"))
	if c.ApprovedPerson != nil {
		fmt.Fprintf(w, "  approved: %s at %s\n", audit.Who(*c.ApprovedPerson, cmdutil.Deref(c.ApprovedDBUser)), c.ApprovedAt.UTC().Format("2006-01-02 15:04:05Z"))
	}
	if c.AbortReason != nil {
		fmt.Fprintf(w, "  aborted:  %s\n", *c.AbortReason)
	}
}

func newCmdChangeApprove(f *cmdutil.Factory) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "approve ID",
		Short: "Approve (and so apply) a governed change another person planned",
		Long: `Approve a governed change: the second pair of eyes. The approval applies it in
the same transaction (a money declaration changed or removed, a replay source
removed, a class made horizon, a min-age lowered, a correction marked
applied). Your login must map to a person other than the planner's.

On a terminal it shows the change (before, after, reason, who planned it)
and asks first; --yes skips the question and is required without one
(exit code 2 otherwise, nothing done).`,
		Example: `  idemctl change show 4 && idemctl change approve 4
  idemctl change approve 4 --yes   # in a script, after reading idemctl change show 4`,
		Args: cmdutil.MaxArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := cmdutil.ParseID(args, "a change")
			if err != nil {
				return err
			}
			if err := cmdutil.NeedYes(f.IO, yes, "change approve applies the change"); err != nil {
				return err
			}
			return changeDecide(cmd.Context(), f, func(pool governance.DBTX) (governance.Change, error) {
				if !yes {
					if err := confirmChange(cmd.Context(), f, pool, id); err != nil {
						return governance.Change{}, err
					}
				}
				return governance.ApproveChange(cmd.Context(), pool, id, f.Operator())
			})
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not show the change and ask on a terminal")
	return cmd
}

// confirmChange shows a governed change on the terminal (stderr) and asks
// whether to approve it; no ends the command with exit 1, nothing done.
func confirmChange(ctx context.Context, f *cmdutil.Factory, db governance.DBTX, id int64) error {
	c, err := governance.GetChange(ctx, db, id)
	if err != nil {
		return err
	}
	printChange(f.IO.ErrOut, c)
	return cmdutil.Confirm(f.IO, false, fmt.Sprintf("Approve change %d (%s), planned by %s, and apply it now?", c.ID, changeSummary(c),
		audit.Who(c.PlannedPerson, c.PlannedDBUser)), "nothing done")
}

func newCmdChangeAbort(f *cmdutil.Factory) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:     "abort ID --reason TEXT",
		Short:   "Withdraw a planned governed change",
		Long:    `Withdraw a planned governed change; any person may, with a reason.`,
		Example: `  idemctl change abort 4 --reason "planned on the wrong class"`,
		Args:    cmdutil.MaxArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := cmdutil.ParseID(args, "a change")
			if err != nil {
				return err
			}
			if reason == "" {
				return cmdutil.UsageErr("--reason is required")
			}
			return changeDecide(cmd.Context(), f, func(pool governance.DBTX) (governance.Change, error) {
				return governance.AbortChange(cmd.Context(), pool, id, f.Operator(), reason)
			})
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why the change is withdrawn")
	return cmd
}

func changeDecide(ctx context.Context, f *cmdutil.Factory, decide func(governance.DBTX) (governance.Change, error)) error {
	pool, err := f.Pool(ctx)
	if err != nil {
		return err
	}
	c, err := decide(pool)
	var silent cmdutil.SilentExit
	if errors.As(err, &silent) {
		return err // declined on the terminal: said so already
	}
	if err != nil {
		return cmdutil.GovernanceErr(err)
	}
	return showChange(f, c)
}

// readErr gives list's and show's errors their exit code: they refuse
// nothing by a rule, so a login the database does not let read the changes
// (a service's login: governance.ErrNotOperator) is ExitFailure, with the
// role they need, not GovernanceErr's ExitInvalid for a refused act.
func readErr(err error) error {
	if errors.Is(err, governance.ErrNotOperator) {
		return cmdutil.WithCode(cmdutil.ExitFailure, fmt.Errorf("%w; reading governed changes needs an operator's or an auditor's login "+
			"(granted the schema's operator or auditor role, idem_operator or idem_auditor by default)", err))
	}
	return cmdutil.GovernanceErr(err)
}
