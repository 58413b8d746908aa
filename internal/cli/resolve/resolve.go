// Package resolve holds `idemctl resolve`, the main job: the recovery
// protocol run for one ambiguous operation or a file of them. resolve.go
// reads the flags, run.go runs the batch, output.go prints what happened.
package resolve

import (
	"context"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/recovery"
	"github.com/idemctl/idemctl/redrive"
)

// ResolveOptions are the flags of `idemctl resolve`.
type ResolveOptions struct {
	IO   *cmdutil.IOStreams
	JSON bool

	// File is the NDJSON input ("-" for stdin); empty for a single operation.
	File string
	// Request is the single operation given by --tenant, --op, --class,
	// --payload and --transport.
	Request recovery.Request

	DryRun      bool
	Report      string
	Concurrency int
	MaxRate     float64
	// MaxLookupRate caps the identities looked up per second.
	MaxLookupRate float64
	BatchSize     int
	Limits        idem.PayloadLimits
	Operator      string
	// RetryFor is how long an operation caught in a connection failure is
	// retried before the run stops as unreachable.
	RetryFor time.Duration
	// OverwriteReport lets --report replace an existing file.
	OverwriteReport bool
	// ProgressInterval is how often a run without a terminal logs a
	// progress line on stderr (0: never).
	ProgressInterval time.Duration
	// RecordRun records the run; nil means the audit log (action resolve.run).
	RecordRun func(ctx context.Context, s recovery.RunSummary) error
	// CredentialDir is where a re-drive's file: references are read.
	CredentialDir string

	f *cmdutil.Factory
}

// NewCmdResolve builds `idemctl resolve`.
func NewCmdResolve(f *cmdutil.Factory, runF func(*ResolveOptions) error) *cobra.Command {
	opts := &ResolveOptions{IO: f.IO, f: f}
	var payload, transport string
	cmd := &cobra.Command{
		Use:   "resolve (--tenant T --op OP --class C --payload JSON | --file F)",
		Short: "Settle operations whose outcome is ambiguous (the recovery protocol)",
		Long: `Give each ambiguous operation (a client timed out, a worker crashed, a failover
happened) a safe and final answer, with its original payload:

  1. check that the database is the authoritative primary (before the run and in
     every transaction): a standby can lag and say "not found";
  2. if the identity exists with the same canonical hash: already_applied, and
     the saved response is returned;
  3. if it does not exist: run the operation now, atomically (idem.execute); if a
     first attempt is still alive, the unique constraint settles the race;
  4. if it exists with another hash: conflict, nothing runs, the request is
     quarantined (its quarantine id is reported).

One operation from flags, or a batch from --file: NDJSON ("-" for stdin, read
to its end first), one operation a line:
  {"tenant": "...", "operation_id": "...", "class": "...", "payload": {...}, "transport": {...}}
(transport optional; "first_attempt_at", an RFC 3339 time, says when the
operation was first attempted: after a failover, an identity absent on the
primary whose first attempt predates the primary's promotion is noted "may have
been acknowledged and lost in the failover at T", docs/resolve-failover.md). A
bad line is answered "invalid" with the reason and the batch goes on.

Lines of the same identity and payload run in file order, one after the
other: the first applies, a later one is already_applied. An input that holds
one identity with two payloads does not say which is true, so none of them is
applied: every line of that identity is a conflict ("the input holds this
identity with another payload at line N"), nothing is sent for it, and the
exit code is 3; when the primary already holds the identity, each line is
answered against the primary as usual (already_applied, or conflict and
quarantined). The whole input is read once before the run to find them.

A class re-driven through its service (idemctl class set --redrive) is sent
only to servers on the re-drive allow-list as it stands when the run first
sends to it, and a redirect is never followed (an error naming its Location).
Its header references read only what the person running resolve set aside:
env:IDEMCTL_REDRIVE_* variables, and file:PATH under --credential-dir, a
regular file only its owner may read, reached without ".." or a symbolic link
out of the directory; any other reference is refused before anything is sent.

Outcomes: applied, already_applied, conflict, purged, invalid (the line is bad,
nothing written), error (not settled: the error says why; an effect that failed
was rolled back and wrote nothing). --dry-run checks steps 1, 2 and 4 with
batched read-only lookups and writes nothing: already_applied, would_apply,
would_redrive, would_conflict, conflict (the input's own), invalid, error (a
dry run does not fetch saved responses). It predicts exactly what the real run
answers each line, would_* standing for what the real run writes, except that
a prediction marked "conditional" (would_apply, would_redrive, and
already_applied for a later line of the same identity and payload, with a note
naming the earlier line) holds unless the operation's own effect refuses it,
when the real run answers error and writes nothing.

A connection that breaks (a failover, a restart, a killed backend) never turns
into an "error" line: the operation may have committed, so it is settled again
on a new connection, with backoff, for --retry-for; it then reports
already_applied (with its saved response) or applied. If the database stays
unreachable, the run stops: nothing more is read, what is in flight finishes,
the summary so far is printed, and exit code 1 names the last line read (a
rerun is safe). If it comes back as a standby or read-only, the run stops with
exit code 4.

Output: on a terminal, a summary by outcome and the rows that need attention;
with -o json, one object a line in input order (line, tenant, operation_id,
class, outcome, response, stored_hash, incoming_hash, quarantine_id, error, and
note when there is one). --report FILE writes the JSON lines to a file as well;
it is created only once the database has passed the primary check, and never
over an existing file unless --overwrite is given (a report is evidence).
--max-rate N protects a busy primary: every executor call (retries
included) and every request to a class's service is spaced 1/N s apart, so
that no one-second window, sliding, holds more than N of them (timing may add
a burst of at most N/10, rounded down). Lookups, which send no operation,
are capped by --max-lookup-rate (identities a second, in bursts of up to one
second's worth; a dry run takes --max-rate when it is not given); the reads
that verify a re-drive after each request are not capped.

A progress bar goes to stderr when it is a terminal; without one, a progress
line every --progress-interval (10s; 0 for none). Both count the lines
answered (blank lines are not counted), show the rate of the last 10 seconds,
and say "reconnecting (down 8s, retrying until 20s)" while the database does
not answer. If results cannot be
written (a closed pipe, a full disk), the run stops reading, what is in flight
finishes and is counted, the run is recorded, and exit code 1 names the error.

Ctrl-C stops reading: operations already in a transaction commit or roll back,
never half, and the summary so far is printed. Running the same file again is
safe: what was applied is reported already_applied. Each run is recorded in the
audit log twice: resolve.start before it reads anything (so that a run an
outage cuts short still leaves a trace) and resolve.run at its end (operator,
database clock, counts), both naming the input by path and SHA-256.`,
		Example: `  # one operation, payload inline or from a file
  idemctl resolve --tenant acme --op charge-42 --class demo.transfer \
    --payload '{"from":"alice","to":"bob","amount":1250,"currency":"EUR"}'
  idemctl resolve --tenant acme --op charge-42 --class demo.transfer --payload @charge-42.json

  # what would happen to a batch, without writing anything
  idemctl resolve --file ambiguous.ndjson --dry-run

  # settle the batch gently on a busy primary, keep a JSON report
  idemctl resolve --file ambiguous.ndjson --concurrency 2 --max-rate 200 --report resolve-report.ndjson

  # at most 40 operations in any second, and 2,000 identities looked up a second
  idemctl resolve --file ambiguous.ndjson --max-rate 40 --max-lookup-rate 2000

  # from a pipe, JSON lines out; conflicts only
  zcat ambiguous.ndjson.gz | idemctl resolve --file - -o json | jq 'select(.outcome == "conflict")'

  # re-drive with credentials the class references (env:IDEMCTL_REDRIVE_PAYMENTS_TOKEN,
  # file:payments/token under the credential directory)
  IDEMCTL_REDRIVE_PAYMENTS_TOKEN="Bearer $(pass show payments)" \
    idemctl resolve --file ambiguous.ndjson --credential-dir ~/.config/idemctl/credentials

  # always through the primary, whichever host it is now
  idemctl resolve --file ambiguous.ndjson \
    --dsn 'postgres://app@db1,db2/payments?target_session_attrs=read-write'`,
		Args: cmdutil.MaxArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.validate(cmd.Flags(), payload, transport); err != nil {
				return err
			}
			opts.JSON = f.JSON()
			opts.Operator = f.Operator()
			if runF != nil {
				return runF(opts)
			}
			return resolveRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&opts.File, "file", "f", "", "NDJSON file of operations, one a line (- for stdin)")
	fl.StringVar(&opts.Request.Tenant, "tenant", "", "tenant_id of one operation")
	fl.StringVar(&opts.Request.OperationID, "op", "", "operation_id of one operation")
	fl.StringVar(&opts.Request.Class, "class", "", "operation class of one operation (e.g. demo.transfer)")
	fl.StringVar(&payload, "payload", "", "original payload of one operation: JSON, or @FILE")
	fl.StringVar(&transport, "transport", "", "transport metadata of one operation: a JSON object, or @FILE (tracing only)")
	fl.BoolVar(&opts.DryRun, "dry-run", false, "look up only: say what would happen, write nothing")
	fl.StringVar(&opts.Report, "report", "", "also write the JSON lines to this file (a new file unless --overwrite)")
	fl.BoolVar(&opts.OverwriteReport, "overwrite", false, "let --report replace an existing file")
	fl.IntVar(&opts.Concurrency, "concurrency", recovery.DefaultConcurrency, "operations (dry run: lookup batches) in flight, one connection each")
	fl.Float64Var(&opts.MaxRate, "max-rate", 0, "at most this many operations (executor calls, service requests) in any one-second window, spaced evenly (0: no limit)")
	fl.Float64Var(&opts.MaxLookupRate, "max-lookup-rate", 0, "at most this many identities looked up per second (0: no limit; a dry run takes --max-rate)")
	fl.IntVar(&opts.BatchSize, "batch-size", recovery.DefaultBatchSize, "identities per dry-run lookup round trip")
	fl.IntVar(&opts.Limits.MaxBytes, "max-bytes", idem.DefaultMaxPayloadBytes, "largest payload accepted, in bytes")
	fl.IntVar(&opts.Limits.MaxDepth, "max-depth", idem.DefaultMaxDepth, "deepest payload nesting accepted")
	fl.DurationVar(&opts.ProgressInterval, "progress-interval", cmdutil.DefaultProgressInterval, "without a terminal on stderr, log a progress line this often (0: never)")
	fl.DurationVar(&opts.RetryFor, "retry-for", recovery.DefaultRetryFor, "how long to retry an operation whose connection failed (a failover) before stopping the run")
	fl.StringVar(&opts.CredentialDir, "credential-dir", os.Getenv(redrive.CredentialDirEnv),
		"the only directory a re-drive's file: references are read under (default $"+redrive.CredentialDirEnv+"; none: file: references are refused)")
	return cmd
}

// validate checks the flags before anything connects, and reads the single
// operation's payload and transport (inline or @FILE): what a run would
// answer invalid is a usage error here, and nothing is written, not even the
// run's record.
func (opts *ResolveOptions) validate(fl *pflag.FlagSet, payload, transport string) error {
	single := map[string]bool{}
	for _, name := range []string{"tenant", "op", "class", "payload", "transport"} {
		single[name] = fl.Changed(name)
	}
	anySingle := single["tenant"] || single["op"] || single["class"] || single["payload"] || single["transport"]
	switch {
	case opts.File != "" && anySingle:
		return cmdutil.UsageErr("give either --file or --tenant/--op/--class/--payload, not both")
	case opts.File == "" && !anySingle:
		return cmdutil.UsageErr("give --file F (NDJSON, - for stdin), or --tenant, --op, --class and --payload for one operation")
	case opts.File == "":
		var missing []string
		for _, name := range []string{"tenant", "op", "class", "payload"} {
			if !single[name] {
				missing = append(missing, "--"+name)
			}
		}
		if len(missing) > 0 {
			return cmdutil.UsageErr("one operation needs %s", strings.Join(missing, ", "))
		}
	}
	if opts.Concurrency < 1 || opts.Concurrency > 64 {
		return cmdutil.UsageErr("--concurrency must be between 1 and 64")
	}
	if opts.MaxRate < 0 || opts.MaxLookupRate < 0 {
		return cmdutil.UsageErr("--max-rate and --max-lookup-rate must be positive (0: no limit)")
	}
	if opts.BatchSize < 1 || opts.BatchSize > 100000 {
		return cmdutil.UsageErr("--batch-size must be between 1 and 100000")
	}
	if opts.Limits.MaxBytes < 1 || opts.Limits.MaxDepth < 1 {
		return cmdutil.UsageErr("--max-bytes and --max-depth must be positive")
	}
	if opts.RetryFor <= 0 {
		return cmdutil.UsageErr("--retry-for must be positive")
	}
	if opts.Report != "" && !opts.OverwriteReport {
		if _, err := os.Lstat(opts.Report); err == nil {
			return cmdutil.WithCode(cmdutil.ExitUsage, errReportExists(opts.Report))
		}
	}
	if opts.File == "" {
		var err error
		if opts.Request.Payload, err = argBytes("--payload", payload, opts.Limits.MaxBytes); err != nil {
			return err
		}
		if single["transport"] {
			if opts.Request.Transport, err = argBytes("--transport", transport, idem.MaxTransportBytes); err != nil {
				return err
			}
		}
		// What a run would answer invalid is a usage error here, before
		// connecting: nothing is written, not even the run's record.
		if err := recovery.Check(opts.Request, opts.Limits); err != nil {
			return cmdutil.UsageErr("%v", err)
		}
	}
	return nil
}

// argBytes reads a flag value given inline or as @FILE.
func argBytes(flag, v string, max int) ([]byte, error) {
	path, isFile := strings.CutPrefix(v, "@")
	if !isFile {
		return []byte(v), nil
	}
	file, err := os.Open(path)
	if err != nil {
		return nil, cmdutil.FileErr("%s: %w", flag, err)
	}
	defer file.Close()
	b, err := cmdutil.ReadLimited(file, max)
	if err != nil {
		return nil, cmdutil.UsageErr("%s: %v", flag, err)
	}
	return b, nil
}
