package reconcile

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/db"
	"github.com/idemctl/idemctl/reconcile"
)

// SuspectsOptions are the flags of `idemctl suspects`.
type SuspectsOptions struct {
	IO    *cmdutil.IOStreams
	JSON  bool
	Since string
	Query reconcile.SuspectsQuery
	f     *cmdutil.Factory
}

// NewCmdSuspects builds `idemctl suspects`.
func NewCmdSuspects(f *cmdutil.Factory, runF func(*SuspectsOptions) error) *cobra.Command {
	opts := &SuspectsOptions{IO: f.IO, f: f}
	cmd := &cobra.Command{
		Use:   "suspects [--since 24h] [--class C] [--window 10m]",
		Short: "List operations that differ only in their operation id (retries that got a new key)",
		Long: `List the operations of one tenant and one class whose canonical payloads are
the same and that were created within --window of each other: the trace of a
client that gives every retry a new operation id, so that the inbox cannot
recognise it and the effect runs twice. Each group is one payload with its
operation ids and times; look at each (idemctl inspect --history) before
calling it a double charge.

Classes whose payloads legitimately repeat (a tick, a fixed daily job) are
declared once (idemctl class set NAME --payloads-repeat yes --reason ...) and
left out unless --class names them; --exclude-class leaves out more for one
run. Nothing is written; an auditor's login is
enough. It reads idem.identity since --since in one pass (BENCHMARKS.md).

Exit code 3 when any group is found (for cron), 0 when none.`,
		Example: `  # from cron: the last day of every class
  idemctl suspects --since 24h -o json > suspects.ndjson || alert-oncall

  # one class, retries within 2 minutes, projections left out
  idemctl suspects --class payments.charge --window 2m --exclude-class reporting.tick`,
		Args: cmdutil.MaxArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			since, err := cmdutil.ParseSinceFlag(opts.Since, f.Now())
			if err != nil {
				return cmdutil.UsageErr("--since: %v", err)
			}
			if opts.Query.Window <= 0 {
				return cmdutil.UsageErr("--window must be positive")
			}
			opts.Query.Since, opts.JSON = since, f.JSON()
			if runF != nil {
				return runF(opts)
			}
			return suspectsRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Since, "since", "24h", "operations created since: a duration back from now (24h) or a time (2026-11-30)")
	fl.StringSliceVar(&opts.Query.Classes, "class", nil, "only these classes (repeat or comma-separate)")
	fl.StringSliceVar(&opts.Query.Exclude, "exclude-class", nil, "leave out classes whose payloads legitimately repeat")
	fl.DurationVar(&opts.Query.Window, "window", reconcile.DefaultSuspectWindow, "how close in time two operations with the same payload must be")
	return cmd
}

func suspectsRun(ctx context.Context, opts *SuspectsOptions) error {
	pool, err := opts.f.OpenPool(ctx, db.Options{MaxConns: 1})
	if err != nil {
		return err
	}
	defer pool.Close()
	groups, err := reconcile.FindSuspects(ctx, pool, opts.Query)
	if err != nil {
		return err
	}
	if opts.JSON {
		for _, g := range groups {
			if err := cmdutil.PrintJSONLine(opts.IO.Out, g); err != nil {
				return err
			}
		}
	} else {
		var rows [][]string
		for i, g := range groups {
			for _, op := range g.Operations {
				rows = append(rows, []string{fmt.Sprint(i + 1), g.Tenant, g.Class, op.OperationID, cmdutil.FormatStamp(op.CreatedAt), g.PayloadHash})
			}
		}
		fmt.Fprintf(opts.IO.ErrOut, "%d group(s) of operations with the same payload within %s, since %s\n",
			len(groups), opts.Query.Window, opts.Query.Since.UTC().Format(time.RFC3339))
		if len(rows) > 0 {
			if err := cmdutil.PrintTable(opts.IO.Out, []string{"GROUP", "TENANT", "CLASS", "OPERATION ID", "CREATED AT", "PAYLOAD HASH"}, rows); err != nil {
				return err
			}
		}
	}
	if len(groups) > 0 {
		return cmdutil.SilentExit{Code: cmdutil.ExitConflict}
	}
	return nil
}
