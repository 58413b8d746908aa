package horizon

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/audit"
	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
)

// HorizonApproveOptions are the flags of `idemctl horizon approve`.
type HorizonApproveOptions struct {
	IO       *cmdutil.IOStreams
	JSON     bool
	ID       int64
	Operator string
	// Yes skips the confirmation asked on a terminal.
	Yes bool
	f   *cmdutil.Factory
}

// NewCmdHorizonApprove builds `idemctl horizon approve`.
func NewCmdHorizonApprove(f *cmdutil.Factory, runF func(*HorizonApproveOptions) error) *cobra.Command {
	opts := &HorizonApproveOptions{IO: f.IO, f: f}
	cmd := &cobra.Command{
		Use:   "approve PLAN",
		Short: "Approve a plan (four eyes: another person than its planner)",
		Long: `Approve a purge plan. Four eyes compares persons: the database login must map
to a person (idemctl person add) other than the planner's, whatever --operator
says; the planner's person, or a login that maps to no person, is refused with
exit code 5. --operator is recorded as the label. Recorded in the audit log.

On a terminal it first shows the plan, its contract and its proof (every
source's evidence) and asks; without a terminal it needs --yes.`,
		Example: `  idemctl horizon approve 12 --operator bob
  idemctl horizon approve 12 --operator bob --yes -o json`,
		Args: cmdutil.MaxArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parsePlanID(args)
			if err != nil {
				return err
			}
			if err := cmdutil.NeedYes(f.IO, opts.Yes, "approving lets a purge run"); err != nil {
				return err
			}
			opts.ID = id
			opts.Operator = f.Operator()
			opts.JSON = f.JSON()
			if runF != nil {
				return runF(opts)
			}
			pool, err := f.Pool(cmd.Context())
			if err != nil {
				return err
			}
			if !opts.Yes && opts.IO.CanPrompt() {
				p, err := horizon.GetPlan(cmd.Context(), pool, opts.ID)
				if err != nil {
					return horizonErr(err)
				}
				if err := printPlan(opts.IO, p); err != nil {
					return err
				}
				q := fmt.Sprintf("Approve plan %d: purge %s rows of class %s created before %s (contract %s, planned by %s)?",
					p.ID, cmdutil.HumanCount(p.Candidates), p.Class, cmdutil.FormatStamp(p.Cutoff), cmdutil.OrDash(p.Contract), audit.Who(p.PlannedPerson, p.PlannedDBUser))
				if err := cmdutil.Confirm(opts.IO, false, q, "nothing approved"); err != nil {
					return err
				}
			}
			p, err := horizon.Approve(cmd.Context(), pool, opts.ID, opts.Operator)
			if err != nil {
				return horizonErr(err)
			}
			if opts.JSON {
				return cmdutil.PrintJSONLine(opts.IO.Out, p)
			}
			fmt.Fprintf(opts.IO.Out, "plan %d approved by %s (planned by %s); run: idemctl horizon purge %d\n",
				p.ID, audit.Who(p.ApprovedPerson, p.ApprovedDBUser), audit.Who(p.PlannedPerson, p.PlannedDBUser), p.ID)
			return nil
		},
	}
	cmd.Flags().BoolVarP(&opts.Yes, "yes", "y", false, "do not show the plan and ask first")
	return cmd
}

// NewCmdHorizonCancel builds `idemctl horizon cancel`.
func NewCmdHorizonCancel(f *cmdutil.Factory) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "cancel PLAN --reason TEXT",
		Short: "Abort a plan that is planned, approved or purging (a running purge stops at its next batch)",
		Long: `Abort a purge plan: it can no longer be approved or purged. A purge of it that
is running stops at its next transaction (what it removed so far stays
removed, and is recorded). Recorded in the audit log with the reason.`,
		Example: `  idemctl horizon cancel 12 --reason "the DLQ owner found older messages"`,
		Args:    cmdutil.MaxArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parsePlanID(args)
			if err != nil {
				return err
			}
			if strings.TrimSpace(reason) == "" {
				return cmdutil.UsageErr("--reason is required")
			}
			pool, err := f.Pool(cmd.Context())
			if err != nil {
				return err
			}
			p, err := horizon.Cancel(cmd.Context(), pool, id, f.Operator(), reason)
			if err != nil {
				return horizonErr(err)
			}
			if f.JSON() {
				return cmdutil.PrintJSONLine(f.IO.Out, p)
			}
			fmt.Fprintf(f.IO.Out, "plan %d aborted by %s: %s\n", p.ID, p.AbortedBy, p.AbortReason)
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why the plan must not be purged (recorded)")
	return cmd
}

func parsePlanID(args []string) (int64, error) {
	if len(args) != 1 {
		return 0, cmdutil.UsageErr("a plan ID is required (idemctl horizon status shows them)")
	}
	id, err := strconv.ParseInt(strings.TrimPrefix(args[0], "#"), 10, 64)
	if err != nil || id <= 0 {
		return 0, cmdutil.UsageErr("invalid plan ID %q: want a positive number", args[0])
	}
	return id, nil
}
