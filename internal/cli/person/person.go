// Package person holds `idemctl person` (add, remove, list): database logins
// mapped to persons, since four eyes compare persons.
package person

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/person"
)

// NewCmdPerson builds `idemctl person` (add, remove, list).
func NewCmdPerson(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "person <command>",
		Short: "Map database logins to persons (four-eyes compares persons)",
		Long: `Four-eyes rules (a purge is planned by one person and approved by another)
compare persons, never the --operator label and never logins: one person may
have several logins, or a pattern of dynamic ones (a Vault or IAM login such as
v-ops-alice-*). A login that maps to no person cannot plan, approve or run a
purge. Only the schema owner changes the mapping: run add and remove with the
login that runs idemctl migrate (a superuser, or a member of idem_owner).
Every change is recorded in the audit log.`,
		Example: `  idemctl person add alice --login alice_ops
  idemctl person add alice --login 'v-ops-alice-*'
  idemctl person add bob --login bob_ops
  idemctl person list
  idemctl person remove --login alice_ops`,
	}
	cmd.AddCommand(newCmdPersonAdd(f), newCmdPersonRemove(f), newCmdPersonList(f))
	return cmd
}

func newCmdPersonAdd(f *cmdutil.Factory) *cobra.Command {
	var login string
	cmd := &cobra.Command{
		Use:   "add NAME --login LOGIN_OR_PATTERN",
		Short: "Map a login (or a pattern of logins, * for any run) to a person",
		Example: `  idemctl person add alice --login alice_ops
  idemctl person add alice --login 'v-ops-alice-*'`,
		Args: cmdutil.MaxArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 || login == "" {
				return cmdutil.UsageErr("a person name and --login are required")
			}
			return personChange(cmd.Context(), f, "mapped", func(ctx context.Context, conn *pgx.Conn) (person.Login, error) {
				return person.Add(ctx, conn, args[0], login)
			})
		},
	}
	cmd.Flags().StringVar(&login, "login", "", "the database login, or a glob pattern of logins")
	return cmd
}

func newCmdPersonRemove(f *cmdutil.Factory) *cobra.Command {
	var login string
	cmd := &cobra.Command{
		Use:     "remove --login LOGIN_OR_PATTERN",
		Short:   "Forget one login mapping (the person stays, for the records that name it)",
		Example: `  idemctl person remove --login alice_ops`,
		Args:    cmdutil.MaxArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if login == "" {
				return cmdutil.UsageErr("--login is required")
			}
			return personChange(cmd.Context(), f, "removed", func(ctx context.Context, conn *pgx.Conn) (person.Login, error) {
				return person.Remove(ctx, conn, login)
			})
		},
	}
	cmd.Flags().StringVar(&login, "login", "", "the database login or pattern to forget")
	return cmd
}

func newCmdPersonList(f *cmdutil.Factory) *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Short:   "Show which logins map to which persons",
		Example: `  idemctl person list -o json`,
		Args:    cmdutil.MaxArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			pool, err := f.Pool(cmd.Context())
			if err != nil {
				return err
			}
			logins, err := person.List(cmd.Context(), pool)
			if err != nil {
				return err
			}
			if f.JSON() {
				for _, l := range logins {
					if err := cmdutil.PrintJSONLine(f.IO.Out, l); err != nil {
						return err
					}
				}
				return nil
			}
			var rows [][]string
			for _, l := range logins {
				rows = append(rows, []string{l.Person, l.Pattern, l.CreatedAt.UTC().Format(time.RFC3339), l.CreatedBy})
			}
			return cmdutil.PrintTable(f.IO.Out, []string{"person", "login", "since", "by"}, rows)
		},
	}
}

// personChange runs one mapping change on a dedicated connection, as the
// schema's owner role, and prints the mapping.
func personChange(ctx context.Context, f *cmdutil.Factory, verb string, change func(context.Context, *pgx.Conn) (person.Login, error)) error {
	conn, err := f.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	l, err := change(ctx, conn)
	if errors.Is(err, person.ErrInvalid) || errors.Is(err, person.ErrNotOwner) {
		return cmdutil.WithCode(cmdutil.ExitInvalid, err)
	}
	if err != nil {
		return err
	}
	if f.JSON() {
		return cmdutil.PrintJSONLine(f.IO.Out, l)
	}
	fmt.Fprintf(f.IO.Out, "%s login %s -> person %s\n", verb, l.Pattern, l.Person)
	return nil
}
