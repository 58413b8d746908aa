// Package corrections holds `idemctl corrections` (add, list, done): the
// manual corrections still waiting to be applied: they pin their identities
// against inbox purges.
package corrections

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
)

// NewCmdCorrections builds `idemctl corrections` (add, list, done).
func NewCmdCorrections(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "corrections <command>",
		Short: "Pending manual corrections: they pin their identities against inbox purges",
		Long: `A manual correction is an operation someone may still replay by hand (a refund
waiting for sign-off, a chargeback fix). While it is pending, its identity is
pinned: the built-in "manual" replay source enumerates it, so no purge removes
it, and a purge approved before the correction was added aborts. Mark it done
once applied. Every change is recorded in the audit log.`,
		Example: `  idemctl corrections add --tenant acme --op charge-42 --reason "refund REF-9 awaiting sign-off"
  idemctl corrections list
  idemctl corrections done 7`,
	}
	cmd.AddCommand(NewCmdCorrectionsAdd(f, nil), NewCmdCorrectionsList(f, nil), NewCmdCorrectionsDone(f, nil))
	return cmd
}

// CorrectionsAddOptions are the flags of `idemctl corrections add`.
type CorrectionsAddOptions struct {
	IO       *cmdutil.IOStreams
	JSON     bool
	Identity idem.Identity
	Reason   string
	Operator string
	f        *cmdutil.Factory
}

// NewCmdCorrectionsAdd builds `idemctl corrections add`.
func NewCmdCorrectionsAdd(f *cmdutil.Factory, runF func(*CorrectionsAddOptions) error) *cobra.Command {
	opts := &CorrectionsAddOptions{IO: f.IO, f: f}
	cmd := &cobra.Command{
		Use:   "add --tenant T --op OP --reason TEXT",
		Short: "Record a pending manual correction (pins its identity)",
		Long: `Record a pending manual correction of one identity. It pins the identity
against purges until "idemctl corrections done". Prints its id.`,
		Example: `  idemctl corrections add --tenant acme --op charge-42 --reason "refund REF-9 awaiting sign-off"`,
		Args:    cmdutil.MaxArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Identity.TenantID == "" || opts.Identity.OperationID == "" {
				return cmdutil.UsageErr("--tenant and --op are required")
			}
			if strings.TrimSpace(opts.Reason) == "" {
				return cmdutil.UsageErr("--reason is required")
			}
			opts.Operator = f.Operator()
			opts.JSON = f.JSON()
			if runF != nil {
				return runF(opts)
			}
			return correctionsAddRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Identity.TenantID, "tenant", "", "tenant_id of the operation")
	cmd.Flags().StringVar(&opts.Identity.OperationID, "op", "", "operation_id of the operation")
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "what is pending and why (recorded)")
	return cmd
}

func correctionsAddRun(ctx context.Context, opts *CorrectionsAddOptions) error {
	pool, err := opts.f.Pool(ctx)
	if err != nil {
		return err
	}
	c, err := horizon.AddCorrection(ctx, pool, opts.Identity, opts.Reason, opts.Operator)
	if err != nil {
		if errors.Is(err, horizon.ErrInvalidCorrection) {
			return cmdutil.WithCode(cmdutil.ExitInvalid, err)
		}
		return err
	}
	if opts.JSON {
		return cmdutil.PrintJSONLine(opts.IO.Out, c)
	}
	fmt.Fprintf(opts.IO.Out, "correction %d pending: %s/%s is pinned until idemctl corrections done %d\n", c.ID, c.Tenant, c.Operation, c.ID)
	return nil
}

// CorrectionsListOptions are the flags of `idemctl corrections list`.
type CorrectionsListOptions struct {
	IO   *cmdutil.IOStreams
	JSON bool
	All  bool
	f    *cmdutil.Factory
}

// NewCmdCorrectionsList builds `idemctl corrections list`.
func NewCmdCorrectionsList(f *cmdutil.Factory, runF func(*CorrectionsListOptions) error) *cobra.Command {
	opts := &CorrectionsListOptions{IO: f.IO, f: f}
	cmd := &cobra.Command{
		Use:   "list [--all]",
		Short: "List pending corrections (--all: done ones too)",
		Long:  `List manual corrections, newest first: pending ones, or all with --all. Nothing is written.`,
		Example: `  idemctl corrections list
  idemctl corrections list --all -o json`,
		Args: cmdutil.MaxArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.JSON = f.JSON()
			if runF != nil {
				return runF(opts)
			}
			return correctionsListRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.All, "all", false, "include corrections marked done")
	return cmd
}

func correctionsListRun(ctx context.Context, opts *CorrectionsListOptions) error {
	pool, err := opts.f.Pool(ctx)
	if err != nil {
		return err
	}
	list, err := horizon.ListCorrections(ctx, pool, opts.All)
	if err != nil {
		return err
	}
	if opts.JSON {
		for _, c := range list {
			if err := cmdutil.PrintJSONLine(opts.IO.Out, c); err != nil {
				return err
			}
		}
		return nil
	}
	if len(list) == 0 {
		fmt.Fprintln(opts.IO.ErrOut, "no pending corrections")
		return nil
	}
	rows := make([][]string, 0, len(list))
	for _, c := range list {
		done := "pending"
		if c.DoneAt != nil {
			done = "done " + cmdutil.FormatStamp(*c.DoneAt) + " by " + c.DoneBy
		}
		rows = append(rows, []string{strconv.FormatInt(c.ID, 10), c.Tenant, c.Operation, c.Reason,
			c.CreatedBy, cmdutil.FormatStamp(c.CreatedAt), done})
	}
	return cmdutil.PrintTable(opts.IO.Out, []string{"id", "tenant", "operation", "reason", "by", "added", "state"}, rows)
}

// CorrectionsDoneOptions are the flags of `idemctl corrections done`.
type CorrectionsDoneOptions struct {
	IO       *cmdutil.IOStreams
	JSON     bool
	ID       int64
	Operator string
	f        *cmdutil.Factory
}

// NewCmdCorrectionsDone builds `idemctl corrections done`.
func NewCmdCorrectionsDone(f *cmdutil.Factory, runF func(*CorrectionsDoneOptions) error) *cobra.Command {
	opts := &CorrectionsDoneOptions{IO: f.IO, f: f}
	return &cobra.Command{
		Use:   "done ID",
		Short: "Plan marking a correction applied (another person approves; then it no longer pins)",
		Long: `Say a pending correction was applied. Once done, its identity is no longer pinned
by the manual source, so purge proofs made afterwards leave it out: that weakens
them, so it is a governed change. This plans it, and another person approves it
(idemctl change approve ID), which marks the correction done; until then it stays
pending and keeps pinning. The database compares persons (idemctl person), not
logins or --operator labels: a login mapped to no person cannot plan it.
Recorded in the audit log.`,
		Example: `  idemctl corrections done 7
  # another person, after checking the correction was applied:
  idemctl change approve 12`,
		Args: cmdutil.MaxArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return cmdutil.UsageErr("a correction ID is required (idemctl corrections list shows them)")
			}
			id, err := strconv.ParseInt(strings.TrimPrefix(args[0], "#"), 10, 64)
			if err != nil || id <= 0 {
				return cmdutil.UsageErr("invalid correction ID %q: want a positive number", args[0])
			}
			opts.ID = id
			opts.Operator = f.Operator()
			opts.JSON = f.JSON()
			if runF != nil {
				return runF(opts)
			}
			return correctionsDoneRun(cmd.Context(), opts)
		},
	}
}

func correctionsDoneRun(ctx context.Context, opts *CorrectionsDoneOptions) error {
	pool, err := opts.f.Pool(ctx)
	if err != nil {
		return err
	}
	c, err := horizon.DoneCorrection(ctx, pool, opts.ID, opts.Operator)
	if err != nil {
		if errors.Is(err, horizon.ErrCorrectionNotFound) {
			return cmdutil.WithCode(cmdutil.ExitNotFound, err)
		}
		if errors.Is(err, horizon.ErrInvalidOperator) || errors.Is(err, horizon.ErrNoPerson) {
			return cmdutil.WithCode(cmdutil.ExitInvalid, err)
		}
		return cmdutil.GovernanceErr(err)
	}
	if opts.JSON {
		return cmdutil.PrintJSONLine(opts.IO.Out, c)
	}
	fmt.Fprintf(opts.IO.Out, "correction %d: marking it applied is planned as change %d; it still pins until then\n",
		opts.ID, c.ID)
	// The command to type next on a line of its own, whole.
	fmt.Fprintf(opts.IO.Out, "  another person approves it: idemctl change approve %d\n", c.ID)
	return nil
}
