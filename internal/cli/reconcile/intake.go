package reconcile

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/db"
	"github.com/idemctl/idemctl/reconcile"
	"github.com/idemctl/idemctl/recovery"
)

// IntakeOptions are the flags of `idemctl intake`.
type IntakeOptions struct {
	IO   *cmdutil.IOStreams
	JSON bool

	Source string
	Class  string
	// TenantPtr and OpPtr read the identity from the body (JSON Pointers).
	TenantPtr, OpPtr string
	// Out is the batch file; empty or "-" for stdout.
	Out       string
	Overwrite bool
	BatchSize int
	Limits    idem.PayloadLimits
	Timeout   time.Duration
	Operator  string

	f *cmdutil.Factory
}

// NewCmdIntake builds `idemctl intake`.
func NewCmdIntake(f *cmdutil.Factory, runF func(*IntakeOptions) error) *cobra.Command {
	opts := &IntakeOptions{IO: f.IO, f: f}
	cmd := &cobra.Command{
		Use:   "intake --source NAME --class C [--out FILE]",
		Short: "Build the ambiguous list from a replay source: a resolve batch",
		Long: `Read every message a replay source holds (a DLQ table, an archive directory, a
NATS or Kafka DLQ: the sources of idemctl horizon source list) and write, as a
resolve batch (the NDJSON idemctl resolve --file reads), each one whose
identity the inbox does not hold (absent) or holds with another payload or
class (conflicting). Messages the inbox holds with the same payload are left
out. This is how the list of ambiguous operations is built after an incident,
instead of by hand.

Where the payload comes from: a postgres source's query returns it as a
fourth column (tenant_id, operation_id, ts, payload; text or jsonb); an
archive's records carry it as "payload"; a NATS or Kafka message's body is it
(streams are read whole, whatever their probe mode). A message without a
payload, absent from the inbox, is written with "payload": null and a note
saying so: resolve refuses that line until someone fills in the payload. A
message without a payload whose identity the inbox holds cannot be compared
(unchecked) and is left out. Every line carries the source and where in it
the message is as its transport, and a note saying why it is there.

--class is the class of the source's operations. The batch goes to stdout, or
to --out FILE (created when the run ends, never over an existing file unless
--overwrite), and a summary to stderr (to stdout with --out). The run is
recorded in the audit log. Nothing is written to the database or the source.
--timeout (default 10m) bounds the reading of the source.`,
		Example: `  # a topic whose messages carry the identity in the body, not in headers
  idemctl intake --source payments-topic --class demo.transfer --tenant-ptr /tenant --op-ptr /id

  # the DLQ table's failed transfers that never made it, or conflict
  idemctl intake --source payments-dlq --class demo.transfer --out ambiguous.ndjson
  idemctl resolve --file ambiguous.ndjson --dry-run

  # straight into resolve
  idemctl intake --source archive --class demo.transfer | idemctl resolve --file - --dry-run`,
		Args: cmdutil.MaxArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case opts.Source == "":
				return cmdutil.UsageErr("--source NAME is required (idemctl horizon source list)")
			case opts.Class == "":
				return cmdutil.UsageErr("--class is required: the class of the source's operations")
			case opts.BatchSize < 1 || opts.BatchSize > 100000:
				return cmdutil.UsageErr("--batch-size must be between 1 and 100000")
			case opts.Timeout <= 0:
				return cmdutil.UsageErr("--timeout must be positive")
			}
			opts.JSON, opts.Operator = f.JSON(), f.Operator()
			if runF != nil {
				return runF(opts)
			}
			return intakeRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Source, "source", "", "the replay source to read (idemctl horizon source list)")
	fl.StringVar(&opts.Class, "class", "", "the class of the source's operations (e.g. demo.transfer)")
	fl.StringVar(&opts.TenantPtr, "tenant-ptr", "", "JSON Pointer of the tenant in the message body, when the headers lack it (/tenant)")
	fl.StringVar(&opts.OpPtr, "op-ptr", "", "JSON Pointer of the operation id in the message body, when the headers lack it (/id)")
	fl.StringVar(&opts.Out, "out", "", "write the batch to this file (default: stdout)")
	fl.BoolVar(&opts.Overwrite, "overwrite", false, "let --out replace an existing file")
	fl.IntVar(&opts.BatchSize, "batch-size", reconcile.DefaultBatchSize, "identities per lookup")
	fl.IntVar(&opts.Limits.MaxBytes, "max-bytes", idem.DefaultMaxPayloadBytes, "largest payload accepted, in bytes")
	fl.IntVar(&opts.Limits.MaxDepth, "max-depth", idem.DefaultMaxDepth, "deepest payload nesting accepted")
	fl.DurationVar(&opts.Timeout, "timeout", reconcile.DefaultIntakeTimeout, "bound on reading the source")
	return cmd
}

func intakeRun(ctx context.Context, opts *IntakeOptions) error {
	pool, err := opts.f.OpenPool(ctx, db.Options{MaxConns: 2})
	if err != nil {
		return err
	}
	defer pool.Close()
	var out *reconcile.BatchWriter
	var file *reconcile.BatchFile
	if opts.Out == "" || opts.Out == "-" {
		out = reconcile.NewBatchWriter(opts.IO.Out)
	} else {
		if file, err = reconcile.CreateBatchFile(opts.Out, opts.Overwrite); err != nil {
			return cmdutil.WithCode(cmdutil.ExitUsage, err)
		}
		defer file.Abort()
		out = file.BatchWriter
	}
	cfg := reconcile.IntakeConfig{Source: opts.Source, Class: opts.Class, Operator: opts.Operator,
		TenantPtr: opts.TenantPtr, OpPtr: opts.OpPtr,
		BatchSize: opts.BatchSize, Limits: opts.Limits, Timeout: opts.Timeout}
	sum, err := reconcile.Intake(ctx, pool, cfg, out)
	var recErr *reconcile.RecordError
	onlyRecord := errors.As(err, &recErr) && err == error(recErr)
	if err != nil && !onlyRecord {
		return intakeErr(opts, err, file != nil)
	}
	if file != nil {
		if err := file.Commit(); err != nil {
			return cmdutil.WithCode(cmdutil.ExitFailure, err)
		}
	}
	if err := printIntake(opts, sum, file != nil); err != nil {
		return err
	}
	if onlyRecord {
		fmt.Fprintln(opts.IO.ErrOut, "idemctl: warning: "+cmdutil.OneLine(recErr.Error()))
	}
	switch {
	case sum.Counts[reconcile.Unreadable] > 0 || sum.Counts[reconcile.NoPayload] > 0:
		return cmdutil.SilentExit{Code: cmdutil.ExitInvalid}
	case sum.Lines > 0:
		return cmdutil.SilentExit{Code: cmdutil.ExitConflict}
	case onlyRecord:
		return cmdutil.SilentExit{Code: cmdutil.ExitFailure}
	}
	return nil
}

// intakeErr maps a run that failed to its exit code.
func intakeErr(opts *IntakeOptions, err error, toFile bool) error {
	switch {
	case errors.Is(err, recovery.ErrNotPrimary):
		return cmdutil.WithCode(cmdutil.ExitNotPrimary, fmt.Errorf("%s: %w", db.Describe(opts.f.DSN()), err))
	case errors.Is(err, horizon.ErrSourceNotFound), errors.Is(err, horizon.ErrNoMessages), errors.Is(err, reconcile.ErrInvalidMapping):
		return cmdutil.WithCode(cmdutil.ExitUsage, err)
	}
	if toFile {
		return cmdutil.WithCode(cmdutil.ExitFailure, fmt.Errorf("intake: %w; no batch was written", err))
	}
	return cmdutil.WithCode(cmdutil.ExitFailure, fmt.Errorf("intake: %w; the batch written so far is incomplete", err))
}

// printIntake writes the summary: to stderr when the batch went to stdout.
func printIntake(opts *IntakeOptions, sum reconcile.IntakeSummary, toFile bool) error {
	w := opts.IO.ErrOut
	if toFile {
		w = opts.IO.Out
	}
	var parts []string
	for _, o := range reconcile.IntakeOutcomes {
		if n := sum.Counts[o]; n > 0 {
			parts = append(parts, cmdutil.HumanCount(int64(n))+" "+string(o))
		}
	}
	if toFile && opts.JSON {
		return cmdutil.PrintJSONLine(w, map[string]any{"summary": sum, "out": opts.Out})
	}
	line := fmt.Sprintf("intake %s (%s): %s messages", sum.Source, sum.Kind, cmdutil.HumanCount(int64(sum.Messages)))
	if len(parts) > 0 {
		line += ": " + strings.Join(parts, ", ")
	}
	dest := "stdout"
	if toFile {
		dest = opts.Out
	}
	fmt.Fprintf(w, "%s; %s line(s) to resolve written to %s (audit row %d)\n", line, cmdutil.HumanCount(int64(sum.Lines)), dest, sum.AuditID)
	for _, p := range sum.Problems {
		fmt.Fprintln(w, "  invalid: "+p)
	}
	return nil
}
