package class

import (
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
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
				return cmdutil.UsageErr("--%s goes with --redrive http|nats", name)
			}
		}
		return nil
	case "none":
		opts.ClearRedrive = true
		return nil
	case redrive.KindHTTP, redrive.KindNATS:
	default:
		return cmdutil.UsageErr("--redrive must be http, nats or none")
	}
	c := &redrive.Config{Kind: r.kind, URL: r.url, Subject: r.subject, Method: strings.ToUpper(r.method),
		TenantHeader: r.tenantHeader, TimeoutSeconds: r.timeout.Seconds(), Concurrency: r.concurrency, Insecure: r.insecure}
	for _, h := range r.headers {
		name, value, ok := strings.Cut(h, "=")
		if !ok || name == "" {
			return cmdutil.UsageErr("--header %q: want NAME=VALUE", h)
		}
		if c.Headers == nil {
			c.Headers = map[string]string{}
		}
		c.Headers[name] = value
	}
	if err := c.Validate(); err != nil {
		return cmdutil.WithCode(cmdutil.ExitUsage, err)
	}
	opts.Redrive, opts.DownstreamIdempotent = c, r.downstreamIdempotent
	return nil
}

// NewCmdRedrive builds `idemctl redrive` (allow, disallow, list): where
