package cli

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/demo"
	"github.com/idemctl/idemctl/idem"
)

// NewCmdDemo builds `idemctl demo` and its subcommands.
func NewCmdDemo(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "demo <command>",
		Short: "Install and run the demo ledger (schema demo, class demo.transfer)",
	}
	cmd.AddCommand(newCmdDemoInit(f), NewCmdDemoRun(f, nil))
	return cmd
}

func newCmdDemoInit(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "init",
		Short: "Install the demo ledger and register demo.transfer (safe to run again)",
		Long: `Install schema demo (accounts per tenant, created on first use; postings) and
register the class demo.transfer (retention forever), whose payload is
{"from": "...", "to": "...", "amount": <integer minor units>, "currency": "..."}.
Needs idemctl migrate first.`,
		Example: `  idemctl migrate && idemctl demo init`,
		Args:    maxArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			conn, err := f.Conn(cmd.Context())
			if err != nil {
				return err
			}
			defer conn.Close(context.Background())
			if err := demo.Install(cmd.Context(), conn); err != nil {
				return err
			}
			fmt.Fprintln(f.IO.ErrOut, "demo ledger installed; class demo.transfer registered")
			return nil
		},
	}
}

// DemoRunOptions are the flags of `idemctl demo run`.
type DemoRunOptions struct {
	IO          *IOStreams
	JSON        bool
	Tenant      string
	OperationID string
	Amount      int64
	f           *Factory
}

// NewCmdDemoRun builds `idemctl demo run`.
func NewCmdDemoRun(f *Factory, runF func(*DemoRunOptions) error) *cobra.Command {
	opts := &DemoRunOptions{IO: f.IO, f: f}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run one transfer, its duplicate and a conflicting retry",
		Long: `Show the executor on the demo ledger: a transfer is applied once; the same
request again (a retry after a timeout) is answered from the inbox with the
saved response and posts nothing; a retry with the same identity and another
amount is quarantined and posts nothing.`,
		Example: `  idemctl demo run
  idemctl demo run --tenant acme --op charge-42 --amount 1250`,
		Args: maxArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.OperationID == "" {
				opts.OperationID = "demo-" + strconv.FormatInt(f.Now().UnixNano(), 36)
			}
			if err := (idem.Identity{TenantID: opts.Tenant, OperationID: opts.OperationID}).Validate(); err != nil {
				return withCode(ExitUsage, err)
			}
			if opts.Amount <= 0 {
				return usageErr("--amount must be a positive integer of minor units")
			}
			opts.JSON = f.JSON()
			if runF != nil {
				return runF(opts)
			}
			return demoRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Tenant, "tenant", "demo", "tenant_id")
	cmd.Flags().StringVar(&opts.OperationID, "op", "", "operation_id (default: a new one)")
	cmd.Flags().Int64Var(&opts.Amount, "amount", 1250, "amount in minor units")
	return cmd
}

func demoRun(ctx context.Context, opts *DemoRunOptions) error {
	pool, err := opts.f.Pool(ctx)
	if err != nil {
		return err
	}
	cmd := func(amount int64) idem.Command {
		return idem.Command{
			Identity: idem.Identity{TenantID: opts.Tenant, OperationID: opts.OperationID},
			Class:    demo.Class,
			Payload:  []byte(fmt.Sprintf(`{"from":"alice","to":"bob","amount":%d,"currency":"EUR"}`, amount)),
		}
	}
	steps := []struct {
		what string
		cmd  idem.Command
	}{
		{"first attempt", cmd(opts.Amount)},
		{"retry, same payload", cmd(opts.Amount)},
		{"retry, other amount", cmd(opts.Amount + 1)},
	}
	var rows [][]string
	for _, s := range steps {
		res, err := idem.Execute(ctx, pool, s.cmd)
		if err != nil {
			return err
		}
		var postings int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM demo.posting WHERE tenant_id = $1 AND operation_id = $2",
			opts.Tenant, opts.OperationID).Scan(&postings); err != nil {
			return err
		}
		answer := string(res.Response)
		if res.Outcome == idem.Conflict {
			answer = fmt.Sprintf("quarantined as #%d, nothing ran", res.QuarantineID)
		}
		if opts.JSON {
			if err := printJSONLine(opts.IO.Out, map[string]any{
				"step": s.what, "tenant": opts.Tenant, "operation_id": opts.OperationID, "class": demo.Class,
				"outcome": res.Outcome, "response": res.Response, "incoming_hash": res.Hash,
				"quarantine_id": nullZero(res.QuarantineID), "postings": postings,
			}); err != nil {
				return err
			}
			continue
		}
		rows = append(rows, []string{s.what, string(res.Outcome), answer, strconv.Itoa(postings)})
	}
	if opts.JSON {
		return nil
	}
	fmt.Fprintf(opts.IO.Out, "operation %s/%s on %s at %s\n", opts.Tenant, opts.OperationID, opts.f.describeDB(), opts.f.Now().UTC().Format(time.RFC3339))
	if err := printTable(opts.IO.Out, []string{"step", "outcome", "response", "postings"}, rows); err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.Out, "One posting: the retry was answered from the inbox; the conflicting retry was quarantined.\nSee it: idemctl inspect --tenant %s --op %s\n", opts.Tenant, opts.OperationID)
	return nil
}

func nullZero(v int64) any {
	if v == 0 {
		return nil
	}
	return v
}
