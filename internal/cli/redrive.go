package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/redrive"
)

// redriveFlags are the re-drive flags of `idemctl class set`.
type redriveFlags struct {
	kind, url, subject, method, tenantHeader string
	headers                                  []string
	timeout                                  time.Duration
	concurrency                              int
	insecure, downstreamIdempotent           bool
}

func (r *redriveFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&r.kind, "redrive", "", "re-drive absent operations through their service: http, nats, or none")
	fl.StringVar(&r.url, "url", "", "the service's endpoint (http), or the NATS server (nats)")
	fl.StringVar(&r.subject, "subject", "", "the NATS subject (a JetStream stream must take it)")
	fl.StringVar(&r.method, "method", "", "HTTP method: POST (default) or PUT")
	fl.StringArrayVar(&r.headers, "header", nil, "extra header NAME=VALUE; credentials as NAME=env:IDEMCTL_REDRIVE_VAR or NAME=file:PATH (under resolve's --credential-dir) (repeatable)")
	fl.StringVar(&r.tenantHeader, "tenant-header", "", "header carrying the tenant (default Idem-Tenant)")
	fl.DurationVar(&r.timeout, "timeout", 0, "timeout of one request (default 10s)")
	fl.IntVar(&r.concurrency, "concurrency", 0, "re-drives in flight to this service at most (default 8)")
	fl.BoolVar(&r.insecure, "allow-insecure", false, "allow plain http to a host that is not loopback (recorded)")
	fl.BoolVar(&r.downstreamIdempotent, "downstream-idempotent", false,
		"the service passes a key derived from (tenant_id, operation_id) to every downstream call")
}

// apply sets opts' re-drive from the flags, or leaves it when --redrive was
// not given.
func (r *redriveFlags) apply(cmd *cobra.Command, opts *ClassSetOptions) error {
	switch r.kind {
	case "":
		for _, name := range []string{"url", "subject", "method", "header", "tenant-header", "timeout", "concurrency", "allow-insecure", "downstream-idempotent"} {
			if cmd.Flags().Changed(name) {
				return UsageErr("--%s goes with --redrive http|nats", name)
			}
		}
		return nil
	case "none":
		opts.ClearRedrive = true
		return nil
	case redrive.KindHTTP, redrive.KindNATS:
	default:
		return UsageErr("--redrive must be http, nats or none")
	}
	c := &redrive.Config{Kind: r.kind, URL: r.url, Subject: r.subject, Method: strings.ToUpper(r.method),
		TenantHeader: r.tenantHeader, TimeoutSeconds: r.timeout.Seconds(), Concurrency: r.concurrency, Insecure: r.insecure}
	for _, h := range r.headers {
		name, value, ok := strings.Cut(h, "=")
		if !ok || name == "" {
			return UsageErr("--header %q: want NAME=VALUE", h)
		}
		if c.Headers == nil {
			c.Headers = map[string]string{}
		}
		c.Headers[name] = value
	}
	if err := c.Validate(); err != nil {
		return WithCode(ExitUsage, err)
	}
	opts.Redrive, opts.DownstreamIdempotent = c, r.downstreamIdempotent
	return nil
}

// NewCmdRedrive builds `idemctl redrive` (allow, disallow, list): where
// classes may be re-driven to.
func NewCmdRedrive(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "redrive <command>",
		Short: "The hosts operations may be re-driven to (allow, disallow, list)",
		Long: `A re-drive sends an operation's payload, and maybe credentials, to a service
(idemctl class set CLASS --redrive ...): where it may go is bounded by an
allow-list of hosts that only the schema owner changes (run allow and
disallow with the login that runs idemctl migrate). Every change is recorded
in the audit log. idemctl demo init allows 127.0.0.1 and localhost, for the
reference service.`,
		Example: `  idemctl redrive allow payments.internal
  idemctl redrive list
  idemctl redrive disallow payments.internal`,
	}
	change := func(use, short string, fn func(context.Context, *pgx.Conn, string) error, verb string) *cobra.Command {
		return &cobra.Command{
			Use: use + " HOST", Short: short, Args: MaxArgs(1),
			Example: "  idemctl redrive " + use + " payments.internal",
			RunE: func(cmd *cobra.Command, args []string) error {
				if len(args) != 1 {
					return UsageErr("a host is required")
				}
				conn, err := f.Conn(cmd.Context())
				if err != nil {
					return err
				}
				defer conn.Close(context.Background())
				if err := fn(cmd.Context(), conn, args[0]); err != nil {
					return WithCode(ExitInvalid, err)
				}
				if f.JSON() {
					return PrintJSONLine(f.IO.Out, map[string]any{"host": strings.ToLower(args[0]), "change": verb})
				}
				fmt.Fprintf(f.IO.Out, "%s %s\n", verb, strings.ToLower(args[0]))
				return nil
			},
		}
	}
	list := &cobra.Command{
		Use: "list", Short: "List the allowed hosts", Args: MaxArgs(0), Example: "  idemctl redrive list -o json",
		RunE: func(cmd *cobra.Command, args []string) error {
			pool, err := f.Pool(cmd.Context())
			if err != nil {
				return err
			}
			hosts, err := redrive.Hosts(cmd.Context(), pool)
			if err != nil {
				return err
			}
			if f.JSON() {
				return PrintJSONLine(f.IO.Out, map[string]any{"hosts": hosts})
			}
			for _, h := range hosts {
				fmt.Fprintln(f.IO.Out, h)
			}
			return nil
		},
	}
	cmd.AddCommand(change("allow", "Allow re-drives to a host (the schema owner only)", redrive.Allow, "allowed"),
		change("disallow", "Stop re-drives to a host (the schema owner only)", redrive.Disallow, "disallowed"), list)
	return cmd
}
