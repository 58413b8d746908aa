package horizon

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/audit"
	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
)

// HorizonPurgeOptions are the flags of `idemctl horizon purge`.
type HorizonPurgeOptions struct {
	IO        *cmdutil.IOStreams
	JSON      bool
	ID        int64
	Yes       bool
	BatchRows int
	Operator  string
	// ProgressInterval is how often a purge without a terminal logs a
	// progress line on stderr (0: never).
	ProgressInterval time.Duration
	f                *cmdutil.Factory
}

// NewCmdHorizonPurge builds `idemctl horizon purge`.
func NewCmdHorizonPurge(f *cmdutil.Factory, runF func(*HorizonPurgeOptions) error) *cobra.Command {
	opts := &HorizonPurgeOptions{IO: f.IO, f: f}
	cmd := &cobra.Command{
		Use:   "purge PLAN [--yes]",
		Short: "Execute an approved plan: re-probe, then purge in bounded transactions",
		Long: `Execute an approved plan. Every source is probed again first: if anything
changed that the plan did not account for (an older bound, a failing or removed
source, new identities pinned inside the purge set, an import that entered
identities into its range after the plan was made), the purge aborts, deletes
nothing, says why, and a new plan is needed (exit code 5). An import that
enters the range while the purge runs stops it the same way at the next
transaction (what it removed before, the plan counted).

Otherwise the plan's set goes in bounded transactions (--batch-rows, default
5,000 rows; a day that lies wholly before the cutoff is swapped out in one
short transaction), each leaving tombstones. Progress goes to stderr on a
terminal. Ctrl-C stops between two transactions; run the same command again
to resume. Counts are recorded in the plan and in the audit log.

On a terminal you are asked to confirm; --yes is required when there is none.`,
		Example: `  idemctl horizon purge 12
  idemctl horizon purge 12 --yes -o json`,
		Args: cmdutil.MaxArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parsePlanID(args)
			if err != nil {
				return err
			}
			opts.ID = id
			if opts.BatchRows < 1 || opts.BatchRows > 1_000_000 {
				return cmdutil.UsageErr("--batch-rows must be between 1 and 1000000")
			}
			if !opts.Yes && !f.IO.CanPrompt() {
				return cmdutil.UsageErr("purge deletes inbox rows: pass --yes when there is no terminal to confirm on")
			}
			opts.Operator = f.Operator()
			opts.JSON = f.JSON()
			if runF != nil {
				return runF(opts)
			}
			return horizonPurgeRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVarP(&opts.Yes, "yes", "y", false, "do not ask for confirmation")
	cmd.Flags().IntVar(&opts.BatchRows, "batch-rows", horizon.DefaultBatchRows, "rows per purge transaction")
	cmd.Flags().DurationVar(&opts.ProgressInterval, "progress-interval", cmdutil.DefaultProgressInterval, "without a terminal on stderr, log a progress line this often (0: never)")
	return cmd
}

func horizonPurgeRun(ctx context.Context, opts *HorizonPurgeOptions) error {
	pool, err := opts.f.Pool(ctx)
	if err != nil {
		return err
	}
	p, err := horizon.GetPlan(ctx, pool, opts.ID)
	if err != nil {
		return horizonErr(err)
	}
	if err := horizon.PurgeReady(p); err != nil {
		return horizonErr(err) // before asking to confirm a purge that cannot run
	}
	if !opts.Yes {
		q := fmt.Sprintf("Purge %s rows of class %s created before %s (plan %d, approved by %s)?",
			cmdutil.HumanCount(p.Candidates-p.Purged), p.Class, cmdutil.FormatStamp(p.Cutoff), p.ID, audit.Who(p.ApprovedPerson, p.ApprovedDBUser))
		if err := cmdutil.Confirm(opts.IO, false, q, "nothing purged"); err != nil {
			return err
		}
	}
	var done atomic.Int64
	done.Store(p.Purged)
	bar := cmdutil.StartProgress(opts.IO, fmt.Sprintf("purge plan %d", p.ID), p.Candidates, done.Load, opts.ProgressInterval)
	res, err := horizon.Purge(ctx, pool, opts.ID, horizon.PurgeOptions{Operator: opts.Operator, BatchRows: opts.BatchRows,
		Progress: func(d, _ int64) { done.Store(d) }})
	bar.Stop()
	if errors.Is(err, horizon.ErrInterrupted) {
		fmt.Fprintf(opts.IO.ErrOut, "interrupted after %s rows (%s of %s in all); resume: idemctl horizon purge %d\n",
			cmdutil.HumanCount(res.Purged), cmdutil.HumanCount(res.Plan.Purged), cmdutil.HumanCount(res.Plan.Candidates), opts.ID)
		return cmdutil.SilentExit{Code: cmdutil.ExitFailure}
	}
	if err != nil {
		return horizonErr(err)
	}
	if opts.JSON {
		if err := cmdutil.PrintJSONLine(opts.IO.Out, res); err != nil {
			return err
		}
	} else if res.Aborted {
		_ = printEvidence(opts.IO, res.Evidence, nil)
	} else {
		fmt.Fprintf(opts.IO.Out, "plan %d done: %s rows purged (%s this run) in %d transactions (%d partitions swapped, %d batches); longest-held locks p99 %s\n",
			res.Plan.ID, cmdutil.HumanCount(res.Plan.Purged), cmdutil.HumanCount(res.Purged), res.Plan.Batches, res.Swaps, res.Batches,
			res.LockHoldP99().Round(time.Millisecond))
	}
	if res.Aborted {
		deleted := "nothing deleted"
		if res.Purged > 0 {
			deleted = fmt.Sprintf("after %s rows the plan counted", cmdutil.HumanCount(res.Purged))
		}
		fmt.Fprintf(opts.IO.ErrOut, "purge aborted, %s: %s\n", deleted, res.AbortReason)
		return cmdutil.SilentExit{Code: cmdutil.ExitInvalid}
	}
	return nil
}

// HorizonStatusOptions are the flags of `idemctl horizon status`.
type HorizonStatusOptions struct {
	IO    *cmdutil.IOStreams
	JSON  bool
	Class string
	ID    int64
	f     *cmdutil.Factory
}

// NewCmdHorizonStatus builds `idemctl horizon status`.
func NewCmdHorizonStatus(f *cmdutil.Factory, runF func(*HorizonStatusOptions) error) *cobra.Command {
	opts := &HorizonStatusOptions{IO: f.IO, f: f}
	cmd := &cobra.Command{
		Use:   "status [PLAN]",
		Short: "List plans and their states (planned, approved, purging, done, aborted)",
		Long: `List purge plans, newest first, with their state, cutoff and counts; with a plan
id, that plan with its proof. Nothing is written.`,
		Example: `  idemctl horizon status
  idemctl horizon status --class reporting.daily_totals -o json
  idemctl horizon status 12`,
		Args: cmdutil.MaxArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				id, err := parsePlanID(args)
				if err != nil {
					return err
				}
				opts.ID = id
			}
			opts.JSON = f.JSON()
			if runF != nil {
				return runF(opts)
			}
			return horizonStatusRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Class, "class", "", "only plans of this class")
	return cmd
}

func horizonStatusRun(ctx context.Context, opts *HorizonStatusOptions) error {
	pool, err := opts.f.Pool(ctx)
	if err != nil {
		return err
	}
	if opts.ID != 0 {
		p, err := horizon.GetPlan(ctx, pool, opts.ID)
		if err != nil {
			return horizonErr(err)
		}
		if opts.JSON {
			return cmdutil.PrintJSONLine(opts.IO.Out, p)
		}
		return printPlan(opts.IO, p)
	}
	plans, err := horizon.ListPlans(ctx, pool, opts.Class, 100)
	if err != nil {
		return err
	}
	if opts.JSON {
		for _, p := range plans {
			p.Proof = nil
			if err := cmdutil.PrintJSONLine(opts.IO.Out, p); err != nil {
				return err
			}
		}
		return nil
	}
	if len(plans) == 0 {
		fmt.Fprintln(opts.IO.ErrOut, "no purge plans")
		return nil
	}
	rows := make([][]string, 0, len(plans))
	for _, p := range plans {
		note := p.Contract
		if p.AbortReason != "" {
			note = p.AbortReason
		}
		rows = append(rows, []string{strconv.FormatInt(p.ID, 10), p.Class, p.Action, string(p.State), cmdutil.FormatStamp(p.Cutoff),
			cmdutil.HumanCount(p.Candidates), cmdutil.HumanCount(p.Pinned), cmdutil.HumanCount(p.Purged), audit.Who(p.PlannedPerson, p.PlannedDBUser),
			audit.Who(p.ApprovedPerson, p.ApprovedDBUser), audit.Who(p.RanPerson, p.RanDBUser), cmdutil.OrDash(note)})
	}
	return cmdutil.PrintTable(opts.IO.Out, []string{"plan", "class", "action", "state", "cutoff", "candidates", "pinned", "purged",
		"planned by", "approved by", "ran by", "contract / abort"}, rows)
}

// HorizonMaintainOptions are the flags of `idemctl horizon maintain`.
type HorizonMaintainOptions struct {
	IO *cmdutil.IOStreams
	f  *cmdutil.Factory
}

// NewCmdHorizonMaintain builds `idemctl horizon maintain`.
func NewCmdHorizonMaintain(f *cmdutil.Factory, runF func(*HorizonMaintainOptions) error) *cobra.Command {
	opts := &HorizonMaintainOptions{IO: f.IO, f: f}
	return &cobra.Command{
		Use:   "maintain",
		Short: "Create the inbox's daily partitions for the week ahead (run it daily)",
		Long: `The inbox body is partitioned by day (UTC) so that a purge can drop whole days.
This creates the partitions for today and the next 7 days; schedule it daily
(cron). A day without its partition still works: its rows land in the
default partition, which purges reach by batches.`,
		Example: `  idemctl horizon maintain
  idemctl horizon maintain -o json   # {"partitions_created":N}`,
		Args: cmdutil.MaxArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			pool, err := f.Pool(cmd.Context())
			if err != nil {
				return err
			}
			n, err := horizon.EnsurePartitions(cmd.Context(), pool)
			if err != nil {
				return err
			}
			if f.JSON() {
				return cmdutil.PrintJSONLine(opts.IO.Out, map[string]any{"partitions_created": n})
			}
			fmt.Fprintf(opts.IO.Out, "%d partition(s) created\n", n)
			return nil
		},
	}
}
