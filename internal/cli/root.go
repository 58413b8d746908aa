// Package cli is idemctl's command line: the root command, which assembles
// one package per command family (internal/cli/resolve, quarantine, horizon,
// ...), each in the cli/cli shape (an Options struct, a NewCmdXxx
// constructor whose RunE validates and calls a run function), over
// internal/cli/cmdutil, which they share.
package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/internal/build"
	"github.com/idemctl/idemctl/internal/cli/audit"
	"github.com/idemctl/idemctl/internal/cli/change"
	"github.com/idemctl/idemctl/internal/cli/class"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/cli/console"
	"github.com/idemctl/idemctl/internal/cli/corrections"
	"github.com/idemctl/idemctl/internal/cli/demo"
	"github.com/idemctl/idemctl/internal/cli/doctor"
	"github.com/idemctl/idemctl/internal/cli/hash"
	"github.com/idemctl/idemctl/internal/cli/horizon"
	"github.com/idemctl/idemctl/internal/cli/imports"
	"github.com/idemctl/idemctl/internal/cli/inspect"
	"github.com/idemctl/idemctl/internal/cli/lab"
	"github.com/idemctl/idemctl/internal/cli/migrate"
	"github.com/idemctl/idemctl/internal/cli/person"
	"github.com/idemctl/idemctl/internal/cli/quarantine"
	"github.com/idemctl/idemctl/internal/cli/reconcile"
	"github.com/idemctl/idemctl/internal/cli/record"
	"github.com/idemctl/idemctl/internal/cli/redrive"
	"github.com/idemctl/idemctl/internal/cli/resolve"
)

// Main runs idemctl with the process's arguments and returns the exit code.
func Main() int {
	// A closed pipe (`idemctl resolve -o json | head -1`) must be a write
	// error the command handles (stop, count, record the run, exit 1), not a
	// SIGPIPE that kills the process mid-run.
	signal.Ignore(syscall.SIGPIPE)
	ios := cmdutil.System()
	f := cmdutil.NewFactory(ios)
	defer f.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return Run(ctx, f, os.Args[1:])
}

// Run executes one command line and returns its exit code; errors are printed
// on stderr as one line.
func Run(ctx context.Context, f *cmdutil.Factory, args []string) int {
	root := NewCmdRoot(f)
	root.SetArgs(args)
	root.SetIn(f.IO.In)
	root.SetOut(f.IO.Out)
	root.SetErr(f.IO.ErrOut)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil && unknownSubcommand(cmd) {
		// A group (horizon, quarantine...) given a name it does not hold:
		// cobra would print the group's help and succeed; a typo in a script
		// must not pass for success.
		err = &cmdutil.ExitError{Code: cmdutil.ExitUsage,
			Err: fmt.Errorf("unknown command %q for %q", cmd.Flags().Arg(0), cmd.CommandPath())}
	}
	if err == nil {
		return cmdutil.ExitOK
	}
	var s cmdutil.SilentExit
	if errors.As(err, &s) {
		return s.Code
	}
	code := cmdutil.CodeOf(err)
	msg := err.Error()
	if strings.HasPrefix(msg, "unknown command") || strings.HasPrefix(msg, "unknown flag") ||
		strings.HasPrefix(msg, "unknown shorthand flag") {
		code = cmdutil.ExitUsage
	}
	fmt.Fprintln(f.IO.ErrOut, "idemctl: "+cmdutil.OneLine(msg))
	if code == cmdutil.ExitUsage {
		path := "idemctl"
		if cmd != nil {
			path = cmd.CommandPath()
		}
		fmt.Fprintf(f.IO.ErrOut, "Run '%s --help' for usage.\n", path)
	}
	return code
}

// unknownSubcommand says whether cmd is a group (a command with
// subcommands and no action of its own) that was given a word it does not
// hold, which cobra answers with the group's help.
func unknownSubcommand(cmd *cobra.Command) bool {
	return cmd != nil && cmd.HasParent() && !cmd.Runnable() && cmd.Flags().NArg() > 0
}

// NewCmdRoot builds the command tree.
func NewCmdRoot(f *cmdutil.Factory) *cobra.Command {
	root := &cobra.Command{
		Use:   "idemctl <command>",
		Short: "Recover and reconcile idempotent operations on PostgreSQL",
		Long: `idemctl answers "did this operation happen?" safely. Every operation is identified
by (tenant_id, operation_id); its payload is hashed canonically (RFC 8785,
SHA-256); the inbox row, the business effect and the saved response commit in
one transaction (idem.execute). A retry with the same payload gets the saved
response; a retry with another payload is quarantined, never run.

The database is --dsn, else IDEMCTL_DSN, else DATABASE_URL, else the libpq
PG* environment (PGSERVICE, PGHOST, PGDATABASE...); with none of them
idemctl refuses rather than guess. A DSN may name a libpq service
(service=prod). Every command checks, before anything else, that the
database holds schema idem at this binary's version, and every command that
writes that the session is a read-write primary; on a terminal it names the
database it reached on stderr. Always point idemctl at the authoritative
primary.`,
		Example: `  # set up a database and the demo ledger, then watch an operation run once
  export IDEMCTL_DSN='postgres://postgres@127.0.0.1:5432/idemctl_demo'
  idemctl migrate
  idemctl demo init
  idemctl demo run

  # the canonical hash of a payload
  echo '{"b":2,"a":1}' | idemctl hash

  # what the inbox holds for one identity
  idemctl inspect --tenant acme --op charge-42`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       build.Version,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if p, ok := cmdutil.PolicyOf(cmd); ok {
				f.SetNeed(p.Need)
			}
			if err := f.ValidateOperator(); err != nil {
				return err
			}
			return f.ValidateOutput(cmd)
		},
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &cmdutil.ExitError{Code: cmdutil.ExitUsage, Err: err}
	})
	root.SetHelpTemplate(cmdutil.HelpTemplate)
	help := root.HelpFunc()
	root.SetHelpFunc(func(c *cobra.Command, args []string) {
		if unknownSubcommand(c) {
			return // Run reports it on stderr, with no help on stdout
		}
		// Written whole once it is built: a reader that stops early
		// (`idemctl resolve --help | head`) closes the pipe, which is not
		// an error of the help's.
		var buf bytes.Buffer
		out := c.OutOrStdout()
		c.SetOut(&buf)
		help(c, args)
		c.SetOut(out)
		_, _ = out.Write(buf.Bytes())
	})
	root.SetUsageTemplate(cmdutil.UsageTemplate)
	cmdutil.SetHelpWidth(root, f.IO.TextWidth())
	pf := root.PersistentFlags()
	pf.StringVar(&f.DSNFlag, "dsn", "", "PostgreSQL connection string (default: IDEMCTL_DSN, DATABASE_URL, PG* env)")
	pf.StringVarP(&f.Output, "output", "o", "auto", "output format: table (fits the terminal), wide (every cell whole) or json (default: table on a terminal, json otherwise)")
	pf.BoolVar(&f.NoHeaders, "no-headers", false, "tables without their header row")
	pf.StringVar(&f.OperatorFlag, "operator", "", "who is acting, for the record (default: IDEMCTL_OPERATOR, then the OS user)")

	root.AddCommand(
		NewCmdVersion(f),
		doctor.NewCmdDoctor(f, nil),
		doctor.NewCmdStatus(f, nil),
		hash.NewCmdHash(f, nil),
		migrate.NewCmdMigrate(f, nil),
		demo.NewCmdDemo(f),
		inspect.NewCmdInspect(f, nil),
	)
	root.AddCommand(lab.NewCmdLab(f, nil))
	root.AddCommand(resolve.NewCmdResolve(f, nil))
	root.AddCommand(reconcile.NewCmdReconcile(f, nil), reconcile.NewCmdIntake(f, nil), reconcile.NewCmdSuspects(f, nil))
	root.AddCommand(quarantine.NewCmdQuarantine(f))
	root.AddCommand(audit.NewCmdAudit(f))
	root.AddCommand(console.NewCmdTUI(f, nil))
	root.AddCommand(horizon.NewCmdHorizon(f), class.NewCmdClass(f), corrections.NewCmdCorrections(f))
	root.AddCommand(person.NewCmdPerson(f), redrive.NewCmdRedrive(f), change.NewCmdChange(f), record.NewCmdRecord(f), imports.NewCmdImport(f))
	return root
}
