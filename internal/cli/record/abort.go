package record

import (
	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/governance"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
)

// NewCmdEntryAbort builds `idemctl record abort` and `idemctl import abort`
// (family "record" or "import"): an entry plan that will not run is ended,
// by any person, with a reason; an import plan's stage is dropped with it.
// show prints the plan as it ends.
func NewCmdEntryAbort(f *cmdutil.Factory, family string, show func(governance.EntryPlan) error) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "abort ID --reason TEXT",
		Short: "End a " + family + " plan that will not run (reject or withdraw it)",
		Long: `End a ` + family + ` plan that will not run: one planned (the approver rejects it, or
the planner withdraws it) or approved and not started. Any person may, with a
reason (recorded in the audit log as entry.abort). An import plan's stage,
the table that holds its rows in the database, is dropped with it. Nothing
enters: a later approve or run of the plan is refused (exit code 5). A
running import is not aborted: run it again to finish it; one whose stage a
crash emptied can never finish, so it is aborted (what it entered stays).`,
		Example: "  idemctl " + family + ` abort 4 --reason "wrong source: the staging copy, not production"`,
		Args:    cmdutil.MaxArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := cmdutil.ParseID(args, "a "+family+" plan")
			if err != nil {
				return err
			}
			if reason == "" {
				return cmdutil.UsageErr("--reason is required")
			}
			pool, err := f.Pool(cmd.Context())
			if err != nil {
				return err
			}
			p, err := governance.AbortEntry(cmd.Context(), pool, id, f.Operator(), reason)
			if err != nil {
				return cmdutil.GovernanceErr(err)
			}
			return show(p)
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why the plan ends (required)")
	return cmd
}
