package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/migrations"
)

// MigrateOptions are the flags of `idemctl migrate`.
type MigrateOptions struct {
	IO     *IOStreams
	JSON   bool
	Status bool
	f      *Factory
}

// NewCmdMigrate builds `idemctl migrate`.
func NewCmdMigrate(f *Factory, runF func(*MigrateOptions) error) *cobra.Command {
	opts := &MigrateOptions{IO: f.IO, f: f}
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Create or upgrade the idem schema (safe to run again)",
		Long: `Apply idemctl's embedded migrations to the database, each in its own
transaction, under an advisory lock so that two operators cannot migrate at
once. Running it again does nothing. A migration that was changed after it was
applied is reported as drift and stops the run.`,
		Example: `  idemctl migrate
  idemctl migrate --status
  idemctl migrate --dsn 'postgres://app@db-primary:5432/payments'`,
		Args: maxArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.JSON = f.JSON()
			if runF != nil {
				return runF(opts)
			}
			return migrateRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Status, "status", false, "show which migrations are applied, change nothing")
	return cmd
}

func migrateRun(ctx context.Context, opts *MigrateOptions) error {
	conn, err := opts.f.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if opts.Status {
		rows, err := migrations.Status(ctx, conn)
		if err != nil {
			return err
		}
		return printMigrationStatus(opts, rows)
	}
	applied, err := migrations.Apply(ctx, conn)
	for _, m := range applied {
		if opts.JSON {
			_ = printJSONLine(opts.IO.Out, map[string]any{"version": m.Version, "name": m.Name, "applied": true})
		} else {
			fmt.Fprintf(opts.IO.Out, "applied %03d_%s\n", m.Version, m.Name)
		}
	}
	if err != nil {
		if errors.Is(err, migrations.ErrDrift) {
			return withCode(ExitFailure, err)
		}
		return err
	}
	if len(applied) == 0 && !opts.JSON {
		fmt.Fprintln(opts.IO.ErrOut, "schema idem is up to date")
	}
	return nil
}

func printMigrationStatus(opts *MigrateOptions, rows []migrations.StatusRow) error {
	pending := 0
	var table [][]string
	for _, r := range rows {
		state, at := "pending", ""
		if r.AppliedAt != nil {
			state, at = "applied", r.AppliedAt.UTC().Format(time.RFC3339)
			if r.Drifted {
				state = "DRIFTED"
			}
		} else {
			pending++
		}
		if opts.JSON {
			if err := printJSONLine(opts.IO.Out, map[string]any{"version": r.Version, "name": r.Name, "state": state, "applied_at": r.AppliedAt, "checksum": r.Checksum}); err != nil {
				return err
			}
			continue
		}
		table = append(table, []string{fmt.Sprintf("%03d", r.Version), r.Name, state, at})
	}
	if !opts.JSON {
		if err := printTable(opts.IO.Out, []string{"version", "name", "state", "applied at"}, table); err != nil {
			return err
		}
		if pending > 0 {
			fmt.Fprintf(opts.IO.ErrOut, "%d pending: run idemctl migrate\n", pending)
		}
	}
	return nil
}
