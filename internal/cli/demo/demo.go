// Package demo holds `idemctl demo` (init, run, serve): the demo ledger and
// its service, to watch an operation run once.
package demo

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/demo"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/db"
)

// NewCmdDemo builds `idemctl demo` and its subcommands.
func NewCmdDemo(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "demo <command>",
		Short: "Install and run the demo ledger (schema demo, class demo.transfer)",
	}
	cmd.AddCommand(newCmdDemoInit(f), NewCmdDemoRun(f, nil), newCmdDemoServe(f))
	return cmd
}

func newCmdDemoInit(f *cmdutil.Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "init",
		Short: "Install the demo ledger and register demo.transfer (safe to run again)",
		Long: `Install schema demo (accounts per tenant, created on first use; postings) and
register the class demo.transfer (retention forever), whose payload is
{"from": "...", "to": "...", "amount": <integer minor units>, "currency": "..."}.
Needs idemctl migrate first.`,
		Example: `  idemctl migrate && idemctl demo init`,
		Args:    cmdutil.MaxArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			conn, err := f.Conn(cmd.Context())
			if err != nil {
				return err
			}
			defer conn.Close(context.Background())
			if err := demo.Install(cmd.Context(), conn); err != nil {
				return err
			}
			if f.JSON() {
				return cmdutil.PrintJSONLine(f.IO.Out, map[string]any{"installed": "demo", "class": demo.Class})
			}
			fmt.Fprintln(f.IO.ErrOut, "demo ledger installed; class demo.transfer registered")
			return nil
		},
	}
}

// DemoRunOptions are the flags of `idemctl demo run`.
type DemoRunOptions struct {
	IO          *cmdutil.IOStreams
	JSON        bool
	Tenant      string
	OperationID string
	Amount      int64
	f           *cmdutil.Factory
}

// NewCmdDemoRun builds `idemctl demo run`.
func NewCmdDemoRun(f *cmdutil.Factory, runF func(*DemoRunOptions) error) *cobra.Command {
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
		Args: cmdutil.MaxArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.OperationID == "" {
				opts.OperationID = "demo-" + strconv.FormatInt(f.Now().UnixNano(), 36)
			}
			if err := (idem.Identity{TenantID: opts.Tenant, OperationID: opts.OperationID}).Validate(); err != nil {
				return cmdutil.WithCode(cmdutil.ExitUsage, err)
			}
			if opts.Amount <= 0 {
				return cmdutil.UsageErr("--amount must be a positive integer of minor units")
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
		postings, err := demo.Postings(ctx, pool, opts.Tenant, opts.OperationID)
		if err != nil {
			return err
		}
		answer := string(res.Response)
		if res.Outcome == idem.Conflict {
			answer = fmt.Sprintf("quarantined as #%d, nothing ran", res.QuarantineID)
		}
		if opts.JSON {
			if err := cmdutil.PrintJSONLine(opts.IO.Out, map[string]any{
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
	fmt.Fprintf(opts.IO.Out, "operation %s/%s on %s at %s\n", opts.Tenant, opts.OperationID, opts.f.DescribeDB(), opts.f.Now().UTC().Format(time.RFC3339))
	if err := cmdutil.PrintTable(opts.IO.Out, []string{"step", "outcome", "response", "postings"}, rows); err != nil {
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

// newCmdDemoServe builds `idemctl demo serve`: the reference service.
func newCmdDemoServe(f *cmdutil.Factory) *cobra.Command {
	var listen, natsURL, subject, stream string
	var faults []string
	cmd := &cobra.Command{
		Use:   "serve [--listen ADDR] [--nats-url URL --subject S] [--fault F]",
		Short: "Run the reference service: demo.transfer_app as application code (HTTP and NATS)",
		Long: `Run the demo ledger's transfer as application code, under the class
demo.transfer_app (installed by idemctl demo init, with no SQL effect), the way
a Go service would: POST /transfers (Idempotency-Key: the operation id,
Idem-Tenant: the tenant, the payload as the body) and, with --nats-url, a
JetStream subscriber on --subject (the stream is created when missing), both
through idem.ExecuteFunc. Its effect charges a fake payment provider
(demo.provider_charge, outside the transaction) with a key derived from the
identity, which the provider de-duplicates on, then posts the transfer in the
transaction. Run it with a login granted idem_app.

It is what idemctl resolve re-drives in make demo and in the tests:
  idemctl class set demo.transfer_app --redrive http --url http://127.0.0.1:8089/transfers --downstream-idempotent

--fault injects a failure on the first request of each identity:
ack-without-record (200, nothing recorded), fail-before-commit (500 after the
provider charged), crash-after-provider (the process dies before its commit),
crash-after-commit (dies before replying), slow=DURATION (waits first).`,
		Example: `  idemctl demo serve --dsn "$APP_DSN" --listen 127.0.0.1:8089
  idemctl demo serve --dsn "$APP_DSN" --nats-url nats://127.0.0.1:4222 --subject demo.transfer_app
  idemctl demo serve --dsn "$APP_DSN" --fault crash-after-provider`,
		Args: cmdutil.MaxArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			fl, err := demo.ParseFaults(faults)
			if err != nil {
				return cmdutil.WithCode(cmdutil.ExitUsage, err)
			}
			if (natsURL == "") != (subject == "") {
				return cmdutil.UsageErr("--nats-url and --subject go together")
			}
			pool, err := f.OpenPool(cmd.Context(), db.Options{MaxConns: 16})
			if err != nil {
				return err
			}
			defer pool.Close()
			provider, err := f.OpenPool(cmd.Context(), db.Options{MaxConns: 16})
			if err != nil {
				return err
			}
			defer provider.Close()
			svc := &demo.Service{Pool: pool, Provider: provider, Faults: fl, Logf: func(format string, a ...any) {
				fmt.Fprintf(f.IO.ErrOut, "demo serve: "+format+"\n", a...)
			}}
			return demoServe(cmd.Context(), f, svc, listen, natsURL, stream, subject)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:8089", "HTTP address (empty: no HTTP)")
	cmd.Flags().StringVar(&natsURL, "nats-url", "", "NATS server for the JetStream subscriber")
	cmd.Flags().StringVar(&subject, "subject", "", "subject of the transfers on NATS")
	cmd.Flags().StringVar(&stream, "stream", "IDEMCTL_DEMO", "JetStream stream taking --subject")
	cmd.Flags().StringArrayVar(&faults, "fault", nil, "inject a failure (see above; repeatable)")
	return cmd
}

// demoServe runs the service until ctx ends (SIGINT, SIGTERM).
func demoServe(ctx context.Context, f *cmdutil.Factory, svc *demo.Service, listen, natsURL, stream, subject string) error {
	errs := make(chan error, 2)
	if listen != "" {
		ln, err := net.Listen("tcp", listen)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", listen, err)
		}
		srv := &http.Server{Handler: svc.Handler(), ReadHeaderTimeout: 10 * time.Second}
		go func() { errs <- srv.Serve(ln) }()
		defer srv.Close()
		fmt.Fprintf(f.IO.ErrOut, "demo serve: listening on http://%s/transfers\n", ln.Addr())
	}
	if natsURL != "" {
		go func() {
			errs <- svc.ConsumeNATS(ctx, natsURL, stream, subject, func() {
				fmt.Fprintf(f.IO.ErrOut, "demo serve: consuming %s on %s\n", subject, natsURL)
			})
		}()
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-errs:
		return err
	}
}
