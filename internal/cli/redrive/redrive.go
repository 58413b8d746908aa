// Package redrive holds `idemctl redrive` (allow, disallow, list): the hosts
// absent operations may be re-driven to.
package redrive

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/redrive"
)

// classes may be re-driven to.
func NewCmdRedrive(f *cmdutil.Factory) *cobra.Command {
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
			Use: use + " HOST", Short: short, Args: cmdutil.MaxArgs(1),
			Example: "  idemctl redrive " + use + " payments.internal",
			RunE: func(cmd *cobra.Command, args []string) error {
				if len(args) != 1 {
					return cmdutil.UsageErr("a host is required")
				}
				conn, err := f.Conn(cmd.Context())
				if err != nil {
					return err
				}
				defer conn.Close(context.Background())
				if err := fn(cmd.Context(), conn, args[0]); err != nil {
					return cmdutil.WithCode(cmdutil.ExitInvalid, err)
				}
				if f.JSON() {
					return cmdutil.PrintJSONLine(f.IO.Out, map[string]any{"host": strings.ToLower(args[0]), "change": verb})
				}
				fmt.Fprintf(f.IO.Out, "%s %s\n", verb, strings.ToLower(args[0]))
				return nil
			},
		}
	}
	list := &cobra.Command{
		Use: "list", Short: "List the allowed hosts", Args: cmdutil.MaxArgs(0), Example: "  idemctl redrive list -o json",
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
				return cmdutil.PrintJSONLine(f.IO.Out, map[string]any{"hosts": hosts})
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
