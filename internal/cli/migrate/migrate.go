// Package migrate holds `idemctl migrate`: schema idem installed or brought to
// this binary's version, or its status.
package migrate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/migrations"
	"github.com/idemctl/idemctl/recovery"
)

// MigrateOptions are the flags of `idemctl migrate`.
type MigrateOptions struct {
	IO     *cmdutil.IOStreams
	JSON   bool
	Status bool
	// RolePrefix names the schema's roles: PREFIX_owner, _app, _operator, _auditor.
	RolePrefix  string
	LockTimeout time.Duration
	// NoDistribute and ShardCount: see migrations.Options.
	NoDistribute bool
	ShardCount   int
	f            *cmdutil.Factory
}

// NewCmdMigrate builds `idemctl migrate`.
func NewCmdMigrate(f *cmdutil.Factory, runF func(*MigrateOptions) error) *cobra.Command {
	opts := &MigrateOptions{IO: f.IO, f: f}
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Create or upgrade the idem schema (safe to run again)",
		Long: `Install or upgrade schema idem: the roles, the numbered migrations (tables,
each in its own transaction) and the code package (functions, views and
triggers, re-installed whenever they change), under an advisory lock so that
two operators cannot migrate at once, with no statement timeout and a lock
timeout (--lock-timeout) so that it never queues the executor behind it for
long. Running it again does nothing.

Run it as a superuser, or as a login with CREATEROLE the first time: it
creates the NOLOGIN roles idem_owner (owns everything; never a superuser),
idem_app (services), idem_operator (idemctl for a person) and idem_auditor
(reads), then creates every object as idem_owner. Grant the group roles to
logins: GRANT idem_operator TO alice_login. A migration changed after it was
applied (drift), or a schema newer than this binary, stops the run.

On a Citus coordinator (the citus extension is installed) it also lays the
schema out for Citus and says what it did: identity, inbox bodies (still
partitioned by day), pending claims and quarantine distributed by tenant_id
and co-located; class policies and purge plans as reference tables; the
audit chain, persons, sources and corrections as Citus local tables on the
coordinator; idem.execute, idem.claim and idem.complete delegated to the node
of their tenant. Tables that already hold rows are copied to the shards, and
writes to each wait while it is copied (the report gives each table's time):
see the README's "Scaling out on Citus" for the steps and downtime.
--no-distribute leaves the tables on the coordinator for now.`,
		Example: `  idemctl migrate
  idemctl migrate --status
  idemctl migrate --dsn 'postgres://admin@db-primary:5432/payments' --lock-timeout 30s
  idemctl migrate --dsn 'postgres://admin@citus-coordinator:5432/payments' --shard-count 64`,
		Args: cmdutil.MaxArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.JSON = f.JSON()
			if runF != nil {
				return runF(opts)
			}
			return migrateRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Status, "status", false, "show which migrations are applied, change nothing")
	cmd.Flags().StringVar(&opts.RolePrefix, "role-prefix", "idem", "name the roles PREFIX_owner, PREFIX_app, PREFIX_operator, PREFIX_auditor")
	cmd.Flags().DurationVar(&opts.LockTimeout, "lock-timeout", 10*time.Second, "fail a statement that waits longer than this for a lock")
	cmd.Flags().BoolVar(&opts.NoDistribute, "no-distribute", false, "on a Citus coordinator, leave the tables on the coordinator (a later migrate distributes them)")
	cmd.Flags().IntVar(&opts.ShardCount, "shard-count", 0, "on a Citus coordinator, shards of the distributed tables when first distributed (0: citus.shard_count)")
	return cmd
}

func migrateRun(ctx context.Context, opts *MigrateOptions) error {
	conn, err := opts.f.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if opts.IO.IsStderrTTY() {
		fmt.Fprintf(opts.IO.ErrOut, "migrate: db %s, %s\n", opts.f.State().Reached, opts.f.State().Role())
	}
	if st := opts.f.State(); !opts.Status && st != nil && (st.InRecovery || st.ReadOnly) {
		return cmdutil.WithCode(cmdutil.ExitNotPrimary, fmt.Errorf("%s: %w", st.Reached,
			&recovery.NotPrimaryError{InRecovery: st.InRecovery, ReadOnly: st.ReadOnly}))
	}
	if opts.Status {
		rows, err := migrations.Status(ctx, conn)
		if err != nil {
			return err
		}
		return printMigrationStatus(opts, rows)
	}
	if opts.ShardCount < 0 {
		return cmdutil.WithCode(cmdutil.ExitUsage, fmt.Errorf("--shard-count: %d is negative", opts.ShardCount))
	}
	rep, err := migrations.Apply(ctx, conn, migrations.Options{Roles: migrations.RolesWithPrefix(opts.RolePrefix), LockTimeout: opts.LockTimeout,
		NoDistribute: opts.NoDistribute, ShardCount: opts.ShardCount})
	if err != nil {
		// A failed run reports the versions the database holds, read
		// afresh, or null when they cannot be read: never the zero of a run
		// that stopped before reading them.
		var schema, code any
		if v, c, ok := migrations.Installed(ctx, conn); ok {
			schema, code = v, c
		}
		printMigrateReport(opts, rep, schema, code)
	} else {
		printMigrateReport(opts, rep, rep.SchemaVersion, rep.CodeVersion)
	}
	if err != nil {
		err = fmt.Errorf("%s: %w", opts.f.DescribeDB(), err)
		if errors.Is(err, migrations.ErrDrift) || errors.Is(err, migrations.ErrSchemaNewer) {
			return cmdutil.WithCode(cmdutil.ExitSchema, err)
		}
		return cmdutil.WithCode(cmdutil.ExitFailure, err)
	}
	// Every registered effect re-checked: one that drifted does not run.
	drifted, err := migrations.DriftedEffects(ctx, conn)
	if err != nil {
		return cmdutil.WithCode(cmdutil.ExitFailure, err)
	}
	for _, d := range drifted {
		fmt.Fprintf(opts.IO.ErrOut, "warning: %s; idem.execute refuses it (IX016) until that is undone or the class is registered again\n", d)
	}
	return nil
}

func printMigrateReport(opts *MigrateOptions, rep migrations.Report, schemaVersion, codeVersion any) {
	if opts.JSON {
		applied := []string{}
		for _, m := range rep.Applied {
			applied = append(applied, fmt.Sprintf("%03d_%s", m.Version, m.Name))
		}
		_ = cmdutil.PrintJSONLine(opts.IO.Out, map[string]any{"roles_created": rep.RolesCreated, "applied": applied,
			"code_installed": rep.CodeInstalled, "code_dropped": rep.CodeDropped,
			"schema_version": schemaVersion, "code_version": codeVersion, "citus": rep.Citus})
		return
	}
	for _, r := range rep.RolesCreated {
		fmt.Fprintf(opts.IO.Out, "created role %s\n", r)
	}
	for _, m := range rep.Applied {
		fmt.Fprintf(opts.IO.Out, "applied %03d_%s\n", m.Version, m.Name)
	}
	if n := len(rep.CodeInstalled) + len(rep.CodeDropped); n > 0 {
		fmt.Fprintf(opts.IO.Out, "code package %d: %d object(s) installed, %d dropped\n", migrations.CodeVersion,
			len(rep.CodeInstalled), len(rep.CodeDropped))
	}
	for _, line := range rep.Citus.Summary() {
		fmt.Fprintln(opts.IO.Out, line)
	}
	if len(rep.RolesCreated)+len(rep.Applied)+len(rep.CodeInstalled)+len(rep.CodeDropped) == 0 && rep.SchemaVersion > 0 {
		fmt.Fprintf(opts.IO.ErrOut, "schema idem is up to date (schema %03d, code package %d)\n", rep.SchemaVersion, rep.CodeVersion)
	}
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
			if err := cmdutil.PrintJSONLine(opts.IO.Out, map[string]any{"version": r.Version, "name": r.Name, "state": state, "applied_at": r.AppliedAt, "checksum": r.Checksum}); err != nil {
				return err
			}
			continue
		}
		table = append(table, []string{fmt.Sprintf("%03d", r.Version), r.Name, state, at})
	}
	if !opts.JSON {
		if err := cmdutil.PrintTable(opts.IO.Out, []string{"version", "name", "state", "applied at"}, table); err != nil {
			return err
		}
		if pending > 0 {
			fmt.Fprintf(opts.IO.ErrOut, "%d pending: run idemctl migrate\n", pending)
		}
	}
	return nil
}
