// Package console holds `idemctl tui`: it checks for a terminal, wires the
// database services and starts the console (package tui).
package console

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/audit"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/person"
	"github.com/idemctl/idemctl/tui"
	"github.com/idemctl/idemctl/tui/styles"
)

// TUIOptions are the flags of `idemctl tui`.
type TUIOptions struct {
	IO *cmdutil.IOStreams
	// JSON is set as for every command; the console has no machine output.
	JSON bool
	// Refresh is how often the queue reloads by itself; 0 turns it off.
	Refresh time.Duration
	// NoColor turns colour off (as NO_COLOR does).
	NoColor bool
	// Mappings is the directory of the saved reconcile mappings.
	Mappings string

	f *cmdutil.Factory
}

// NewCmdTUI builds `idemctl tui`.
func NewCmdTUI(f *cmdutil.Factory, runF func(*TUIOptions) error) *cobra.Command {
	opts := &TUIOptions{IO: f.IO, f: f}
	cmd := &cobra.Command{
		Use:   "tui",
		Short: "On-call console: quarantine queue, step-by-step resolve, purge approval, audit log, reconcile, approvals",
		Long: `The console an on-call engineer uses by hand, over the same services as the
other commands:

  1 Queue    the quarantine queue (opens here): filter by status (s), search by
             tenant or operation id (/), refreshes by itself (r now); enter
             opens a record's evidence: the differing fields (JSON Pointer,
             stored and incoming values) and both canonical hashes; x rejects,
             a accepts it as a new operation (a reason, then a confirmation).
  2 Resolve  one ambiguous operation through the recovery protocol, one step at
             a time: primary check, lookup, hash comparison, execute or
             quarantine. Dry run is on by default; a real run asks first.
  3 Horizon  replay sources with their last probe, purge plans; approve (four
             eyes: not the planner) and purge with progress.
  4 Audit    the latest audit rows (read-only) and the chain verification.
  5 Reconcile  the saved reconcile mappings (--mappings DIR, *.json, written
             by idemctl reconcile --save-mapping); enter runs one against its
             report: the counts and amounts per status, the discrepancies;
             enter opens one, p pins it as a pending manual correction.
  6 Approvals  accept-as-new and record plans with the money totals per
             currency each applies; enter shows each record's changed fields
             (or its evidence); a approves (four eyes: not the planner).

Keys: tab or 1-6 switch views, ? full help, esc back, q or ctrl+c quit.
Every decision is recorded with the operator (--operator, IDEMCTL_OPERATOR,
else the OS user). NO_COLOR (or --no-color) turns colour off. It needs a
terminal of at least 60x16.`,
		Example: `  idemctl tui --dsn 'postgres://idemctl@db-primary:5432/payments' --operator alice
  IDEMCTL_OPERATOR=bob NO_COLOR=1 idemctl tui
  idemctl tui --refresh 0   # no automatic refresh of the queue
  idemctl tui --mappings /etc/idemctl/reconcile`,
		Args: cmdutil.MaxArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Refresh < 0 || (opts.Refresh > 0 && opts.Refresh < time.Second) {
				return cmdutil.UsageErr("--refresh must be 0 (off) or at least 1s, got %s", opts.Refresh)
			}
			if f.Output == "json" {
				return cmdutil.UsageErr("idemctl tui has no JSON output; use idemctl quarantine list -o json or idemctl audit list -o json")
			}
			opts.JSON = f.JSON()
			if styles.NoColorEnv() {
				opts.NoColor = true
			}
			if runF != nil {
				return runF(opts)
			}
			return tuiRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().DurationVar(&opts.Refresh, "refresh", tui.DefaultRefresh, "how often the queue reloads by itself (0: never)")
	cmd.Flags().BoolVar(&opts.NoColor, "no-color", false, "no colour (also NO_COLOR=1)")
	cmd.Flags().StringVar(&opts.Mappings, "mappings", defaultMappingsDir(), "directory of the saved reconcile mappings (*.json)")
	return cmd
}

// defaultMappingsDir is $XDG_CONFIG_HOME/idemctl/reconcile (~/.config/...).
func defaultMappingsDir() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "idemctl", "reconcile")
}

// errNoTerminal: the console needs a person at a terminal.
var errNoTerminal = errors.New("idemctl tui needs a terminal on stdin and stdout; for scripts use idemctl quarantine, resolve and audit with -o json")

func tuiRun(ctx context.Context, opts *TUIOptions) error {
	if !opts.IO.CanPrompt() {
		return cmdutil.WithCode(cmdutil.ExitUsage, errNoTerminal)
	}
	// The console opens whatever the schema: a schema problem is its
	// screen, not a queue that looks empty.
	problem := ""
	pool, err := opts.f.Pool(ctx)
	if err != nil {
		return err
	}
	if err := opts.f.State().Check(cmdutil.NeedSchema); err != nil {
		problem = cmdutil.OneLine(err.Error())
	} else if st := opts.f.State(); st.InRecovery || st.ReadOnly {
		problem = cmdutil.OneLine(opts.f.State().Check(cmdutil.NeedWrite).Error())
	}
	refresh := opts.Refresh
	if refresh == 0 {
		refresh = -1 // tui.Options: negative means never
	}
	// The person the database will record for this login, with the login:
	// what a decision's confirmation shows (the --operator label is only a label).
	var who string
	if problem == "" {
		var login string
		if err := pool.QueryRow(ctx, "SELECT session_user").Scan(&login); err == nil {
			p, _ := person.Current(ctx, pool)
			who = audit.Who(p, login)
		}
	}
	services := tui.PoolServices(pool)
	services.Reconcile = tui.ReconcileDB{Pool: pool, Dir: opts.Mappings}
	err = tui.Run(ctx, opts.IO.In, opts.IO.RawOut, tui.Options{
		Services: services,
		Operator: opts.f.Operator(),
		Who:      who,
		Database: opts.f.DescribeDB(),
		Now:      opts.f.Now,
		Refresh:  refresh,
		Problem:  problem,
	}, opts.NoColor)
	if err != nil && ctx.Err() != nil {
		return cmdutil.WithCode(cmdutil.ExitFailure, errors.New("interrupted"))
	}
	return err
}
