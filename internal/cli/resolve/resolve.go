package resolve

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/db"
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
    --dsn 'postgres://app@db1:5432,db2:5432/payments?target_session_attrs=read-write'`,
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
		return nil, cmdutil.UsageErr("%s: %v", flag, err)
	}
	defer file.Close()
	b, err := cmdutil.ReadLimited(file, max)
	if err != nil {
		return nil, cmdutil.UsageErr("%s: %v", flag, err)
	}
	return b, nil
}

// ResolveRecord is one line of `resolve -o json` and of --report.
type ResolveRecord struct {
	Line         int             `json:"line,omitempty"`
	Tenant       string          `json:"tenant"`
	OperationID  string          `json:"operation_id"`
	Class        string          `json:"class"`
	Outcome      string          `json:"outcome"`
	Response     json.RawMessage `json:"response"`
	StoredHash   *string         `json:"stored_hash"`
	StoredClass  string          `json:"stored_class,omitempty"`
	IncomingHash *string         `json:"incoming_hash"`
	QuarantineID *int64          `json:"quarantine_id"`
	Error        *string         `json:"error"`
	Note         string          `json:"note,omitempty"`
	// Conditional (dry run): the prediction holds unless the operation's own
	// effect refuses it (then error, nothing written).
	Conditional bool `json:"conditional,omitempty"`
	// Changes are the values that differ from the stored payload (a
	// conflict of a real run).
	Changes []recovery.Change `json:"changes,omitempty"`
	// Redrive is what was sent to the class's service, when it was re-driven.
	Redrive *recovery.RedriveTrace `json:"redrive,omitempty"`
}

func newResolveRecord(r recovery.Result) ResolveRecord {
	rec := ResolveRecord{Line: r.Line, Tenant: r.Tenant, OperationID: r.OperationID, Class: r.Class,
		Outcome: string(r.Outcome), Response: r.Response, StoredHash: nullString(r.StoredHash),
		StoredClass: r.StoredClass, IncomingHash: nullString(r.IncomingHash), Note: r.Note, Redrive: r.Redrive,
		Conditional: r.Conditional, Changes: r.Changes}
	if r.QuarantineID != 0 {
		rec.QuarantineID = &r.QuarantineID
	}
	if r.Err != nil {
		msg := cmdutil.OneLine(r.Err.Error())
		rec.Error = &msg
	}
	return rec
}

func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// jsonSink writes JSON lines through a buffer, flushed at least every 100 ms
// so that a reader at the other end of a pipe sees results as they come.
type jsonSink struct {
	w         *bufio.Writer
	lastFlush time.Time
	file      *os.File // closed at the end (the report), nil for stdout
}

// close flushes the sink and closes its file, if it has one.
func (s *jsonSink) close() error {
	err := s.w.Flush()
	if s.file != nil {
		if cerr := s.file.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

func (s *jsonSink) write(rec *ResolveRecord) error {
	if err := json.NewEncoder(s.w).Encode(rec); err != nil {
		return err
	}
	if now := time.Now(); now.Sub(s.lastFlush) > 100*time.Millisecond {
		s.lastFlush = now
		return s.w.Flush()
	}
	return nil
}

// resolveInput is a run's input: its operations, how many lines it has
// (0: unknown), its name, and its SHA-256 (a file's is computed before the
// run; stdin's as it is read, known once read to its end).
type resolveInput struct {
	src    recovery.Source
	total  int64
	name   string
	sha256 func() string
	close  func()
}

func openResolveInput(opts *ResolveOptions) (resolveInput, error) {
	in := resolveInput{name: "command line", sha256: func() string { return "" }, close: func() {}}
	maxLine := opts.Limits.MaxBytes + recovery.LineSlack
	switch {
	case opts.File == "":
		in.src = recovery.Single(opts.Request)
	default:
		in.name = opts.File
		var file *os.File
		var err error
		if opts.File == "-" {
			in.name = "stdin"
			file, err = spoolStdin(opts.IO.In)
		} else {
			file, err = os.Open(opts.File)
		}
		if err != nil {
			return in, cmdutil.WithCode(cmdutil.ExitFailure, fmt.Errorf("open input: %w", err))
		}
		lines, sum, err := digestFile(file)
		if err != nil {
			file.Close()
			return in, cmdutil.WithCode(cmdutil.ExitFailure, fmt.Errorf("read input: %w", err))
		}
		in.total, in.sha256, in.close = lines, func() string { return sum }, func() { file.Close() }
		in.src = recovery.NDJSON(file, maxLine)
	}
	return in, nil
}

func resolveRun(ctx context.Context, opts *ResolveOptions) error {
	single := opts.File == ""
	in, err := openResolveInput(opts)
	if err != nil {
		return err
	}
	defer in.close()
	src, total, sourceName, inputSHA := in.src, in.total, in.name, in.sha256

	var sinks []*jsonSink
	if opts.JSON {
		sinks = append(sinks, &jsonSink{w: bufio.NewWriterSize(opts.IO.Out, 64<<10)})
	}
	// The report is created once the database has passed the primary check:
	// a refused run leaves an existing report as it was.
	startReport := func() error {
		if opts.Report == "" {
			return nil
		}
		report, err := createReport(opts.Report, opts.OverwriteReport)
		if err != nil {
			return err
		}
		sinks = append(sinks, &jsonSink{w: bufio.NewWriterSize(report, 64<<10), file: report})
		return nil
	}
	closed := false
	closeSinks := func() error {
		if closed {
			return nil
		}
		closed = true
		var first error
		for _, s := range sinks {
			if err := s.close(); err != nil && first == nil {
				first = err
			}
		}
		return first
	}
	defer closeSinks()

	pool, err := opts.f.OpenPool(ctx, db.Options{MaxConns: int32(opts.Concurrency + 1)})
	if err != nil {
		return err
	}
	defer pool.Close()

	record, recordStart := opts.RecordRun, func() error { return nil }
	if record == nil {
		record = func(ctx context.Context, s recovery.RunSummary) error {
			s.InputSHA256 = inputSHA()
			return recovery.AuditRun(ctx, pool, s)
		}
		recordStart = func() error {
			err := recovery.AuditRunStart(ctx, pool, recovery.RunSummary{Operator: opts.Operator, Source: sourceName,
				DryRun: opts.DryRun, InputSHA256: inputSHA()})
			if err != nil {
				return fmt.Errorf("record the run's start in the audit log: %w", err)
			}
			return nil
		}
	}
	started := func() error {
		if err := recordStart(); err != nil {
			return err
		}
		return startReport()
	}
	r := &recovery.Resolver{Pool: pool, Config: recovery.Config{
		Limits: opts.Limits, Concurrency: opts.Concurrency, MaxRate: opts.MaxRate, MaxLookupRate: opts.MaxLookupRate, DryRun: opts.DryRun,
		BatchSize: opts.BatchSize, Operator: opts.Operator, Source: sourceName, RecordRun: record,
		RetryFor: opts.RetryFor, Started: started, Flush: closeSinks,
		Credentials: redrive.Credentials{Dir: opts.CredentialDir},
	}}

	var attention []recovery.Result
	moreAttention := 0
	var only *recovery.Result
	emit := func(res recovery.Result) error {
		if single {
			only = &res
		} else if !opts.JSON && !res.Outcome.Converged() {
			if len(attention) < cmdutil.MaxAttentionRows {
				attention = append(attention, res)
			} else {
				moreAttention++
			}
		}
		if len(sinks) > 0 {
			rec := newResolveRecord(res)
			for _, s := range sinks {
				if err := s.write(&rec); err != nil {
					return err
				}
			}
		}
		return nil
	}

	var bar *cmdutil.ProgressBar
	if !single {
		bar = cmdutil.StartProgressWith(opts.IO, "resolve", total, func() int64 { n, _ := r.Progress(); return n }, func() string {
			if down, since, budget := r.Outage(); down {
				return fmt.Sprintf("reconnecting (down %s, retrying until %s)", since.Round(time.Second), budget)
			}
			return ""
		}, opts.ProgressInterval)
	}
	sum, runErr := r.Run(ctx, src, emit)
	bar.Stop()

	fatal, recordErr := splitRecordErr(runErr)
	switch {
	case errors.Is(fatal, recovery.ErrNotPrimary) && sum.Read == 0:
		// Refused before anything: one line, nothing else.
		return cmdutil.WithCode(cmdutil.ExitNotPrimary, fmt.Errorf("%s: %w", db.Describe(opts.f.DSN()), fatal))
	case fatal != nil && sum.FinishedAt.IsZero():
		// Nothing ran (the database check or creating the report failed): one line.
		return cmdutil.WithCode(cmdutil.ExitFailure, fatal)
	}
	if !opts.JSON {
		if single && only != nil {
			if err := printResolveResult(opts.IO.Out, *only); err != nil {
				return err
			}
		} else if !single {
			if err := printResolveSummary(opts.IO.Out, sum, attention, moreAttention, opts.Report); err != nil {
				return err
			}
		}
	} else {
		fmt.Fprintln(opts.IO.ErrOut, "resolve: "+summaryLine(sum))
	}

	code := cmdutil.ExitOK
	switch {
	case sum.Conflicts() > 0:
		code = cmdutil.ExitConflict
	case sum.Problems() > 0:
		code = cmdutil.ExitInvalid
	case sum.Pending() > 0:
		code = cmdutil.ExitPending
	case sum.Interrupted:
		code = cmdutil.ExitFailure
	}
	if sum.Interrupted && fatal == nil {
		fmt.Fprintf(opts.IO.ErrOut, "idemctl: interrupted after %s (%s read); the transactions in flight finished; %s.\n",
			cmdutil.CountOf(int64(sum.Counts.Total()), "operation"), cmdutil.HumanCount(int64(sum.Read)), stoppedAt(sum))
	}
	if recordErr != nil {
		fmt.Fprintln(opts.IO.ErrOut, "idemctl: warning: "+cmdutil.OneLine(recordErr.Error()))
		if code == cmdutil.ExitOK {
			code = cmdutil.ExitFailure
		}
	}
	switch {
	case errors.Is(fatal, recovery.ErrNotPrimary):
		return cmdutil.WithCode(cmdutil.ExitNotPrimary, fmt.Errorf("%s: %w; %s", db.Describe(opts.f.DSN()), fatal, stoppedAt(sum)))
	case errors.Is(fatal, recovery.ErrUnreachable):
		return cmdutil.WithCode(cmdutil.ExitFailure, fmt.Errorf("%s: %w; %s", db.Describe(opts.f.DSN()), fatal, stoppedAt(sum)))
	case errors.Is(fatal, recovery.ErrWriteResults):
		return cmdutil.WithCode(cmdutil.ExitFailure, fmt.Errorf("%w; %s", fatal, stoppedAt(sum)))
	case fatal != nil:
		return cmdutil.WithCode(cmdutil.ExitFailure, fatal)
	case code != cmdutil.ExitOK:
		return cmdutil.SilentExit{Code: code}
	}
	return nil
}

// stoppedAt says where a run that stopped midway left its input, for the one
// line that ends it.
func stoppedAt(s recovery.RunSummary) string {
	if !s.Interrupted {
		return "every line was read"
	}
	msg := fmt.Sprintf("stopped after line %d: nothing after it was attempted", s.LastLine)
	if s.Unknown > 0 {
		msg += fmt.Sprintf("; %d operation(s) before it lost their connection in flight and have an unknown outcome", s.Unknown)
	}
	if notStarted := s.Read - s.Counts.Total() - s.Unknown; notStarted > 0 {
		msg += fmt.Sprintf("; %d operation(s) read before it were not started", notStarted)
	}
	return msg + "; rerun is safe: what was applied is reported already_applied"
}

// splitRecordErr separates a failure to record the run (the results stand)
// from failures of the run itself, which Run joins before it.
func splitRecordErr(err error) (fatal, record error) {
	var rec *recovery.RecordError
	if !errors.As(err, &rec) {
		return err, nil
	}
	if err == error(rec) {
		return nil, rec
	}
	var rest []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if e != error(rec) {
				rest = append(rest, e)
			}
		}
	}
	if len(rest) == 1 {
		return rest[0], rec
	}
	return errors.Join(rest...), rec
}

// summaryLine is the one-line summary: "12 operations: 10 applied, 2 conflict".
func summaryLine(s recovery.RunSummary) string {
	var parts []string
	for _, o := range recovery.Outcomes {
		if n := s.Counts[o]; n > 0 {
			parts = append(parts, cmdutil.HumanCount(int64(n))+" "+string(o))
		}
	}
	line := cmdutil.CountOf(int64(s.Counts.Total()), "operation")
	if s.DryRun {
		line += " (dry run, nothing written)"
	}
	if len(parts) > 0 {
		line += ": " + strings.Join(parts, ", ")
	}
	if s.Redriven > 0 {
		line += "; " + cmdutil.HumanCount(int64(s.Redriven)) + " sent to their class's service"
	}
	if s.Interrupted {
		line += "; interrupted, " + cmdutil.HumanCount(int64(s.Read)) + " read"
	}
	return line
}

// outcomeMeaning explains each outcome in the summary table.
var outcomeMeaning = map[recovery.Outcome]string{
	recovery.AlreadyApplied: "was applied before; saved response returned",
	recovery.Applied:        "was absent; applied now, once",
	recovery.WouldApply:     "absent; a real run would apply it",
	recovery.WouldRedrive:   "absent; a real run would send it to its class's service (nothing sent)",
	recovery.Pending:        "sent to its service (its stream, or it asked to wait), not recorded yet: run it again later",
	recovery.Purged:         "purged under a proven replay horizon",
	recovery.Conflict:       "another payload under this identity; quarantined, nothing ran",
	recovery.WouldConflict:  "another payload under this identity; a real run would quarantine it",
	recovery.Invalid:        "bad input line; nothing written",
	recovery.Failed:         "not settled; the error says why (a failed effect wrote nothing)",
}

func printResolveSummary(w io.Writer, s recovery.RunSummary, attention []recovery.Result, more int, report string) error {
	var rows [][]string
	for _, o := range recovery.Outcomes {
		if n := s.Counts[o]; n > 0 {
			rows = append(rows, []string{string(o), cmdutil.HumanCount(int64(n)), outcomeMeaning[o]})
		}
	}
	rows = append(rows, []string{"total", cmdutil.HumanCount(int64(s.Counts.Total())), ""})
	fmt.Fprintln(w, "resolve: "+summaryLine(s))
	if err := cmdutil.PrintTable(w, []string{"outcome", "count", "meaning"}, rows); err != nil {
		return err
	}
	if len(attention) == 0 {
		return nil
	}
	fmt.Fprintln(w, "Needs attention:")
	rows = rows[:0]
	for _, r := range attention {
		rows = append(rows, []string{fmt.Sprint(r.Line), escapeControl(r.Tenant), escapeControl(r.OperationID), string(r.Outcome), attentionDetail(r)})
	}
	if err := cmdutil.PrintTable(w, []string{"line", "tenant", "operation_id", "outcome", "detail"}, rows); err != nil {
		return err
	}
	if more > 0 {
		if report != "" {
			fmt.Fprintf(w, "... and %s more: every row is in %s.\n", cmdutil.HumanCount(int64(more)), report)
		} else {
			fmt.Fprintf(w, "... and %s more: use -o json or --report FILE for every row.\n", cmdutil.HumanCount(int64(more)))
		}
	}
	return nil
}

func attentionDetail(r recovery.Result) string {
	switch r.Outcome {
	case recovery.Conflict, recovery.WouldConflict:
		if r.StoredHash == "" && r.Note != "" {
			return r.Note
		}
		d := "stored " + shortHash(r.StoredHash) + ", incoming " + shortHash(r.IncomingHash)
		if len(r.Changes) > 0 {
			d = describeChanges(r.Changes)
		}
		if r.StoredClass != "" {
			d = "stored class " + r.StoredClass + ", " + d
		}
		if r.QuarantineID != 0 {
			d = fmt.Sprintf("quarantined as #%d: %s (idemctl quarantine show %d)", r.QuarantineID, d, r.QuarantineID)
		}
		return d
	}
	if r.Err != nil {
		msg := cmdutil.OneLine(r.Err.Error())
		if len(msg) > 160 {
			msg = msg[:157] + "..."
		}
		return msg
	}
	return ""
}

// maxChangesShown is how many changed values a conflict's row names.
const maxChangesShown = 3

// describeChanges names the values that changed, "/amount 1101 -> 2101",
// at most maxChangesShown, then "+N more".
func describeChanges(changes []recovery.Change) string {
	var parts []string
	for i, c := range changes {
		if i == maxChangesShown {
			parts = append(parts, fmt.Sprintf("+%d more", len(changes)-maxChangesShown))
			break
		}
		ptr := c.Pointer
		if ptr == "" {
			ptr = "(whole payload)"
		}
		parts = append(parts, escapeControl(ptr)+" "+changeValue(c.Stored)+" -> "+changeValue(c.Incoming))
	}
	return strings.Join(parts, ", ")
}

// changeValue is one side of a change, compact, cut to 40 characters.
func changeValue(v json.RawMessage) string {
	var b bytes.Buffer
	if len(v) == 0 || json.Compact(&b, v) != nil {
		return "null"
	}
	s := []rune(escapeControl(b.String()))
	if len(s) > 40 {
		return string(s[:39]) + "…"
	}
	return string(s)
}

// escapeControl writes the control characters of s as Go escapes (\t,
// \x1b, \u0085), so that an id holding one cannot move the cursor or break
// a table's columns, which are measured after.
func escapeControl(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func shortHash(h string) string {
	if len(h) > len(idem.HashPrefix)+12 {
		return h[:len(idem.HashPrefix)+12] + "…"
	}
	return h
}

func printResolveResult(w io.Writer, r recovery.Result) error {
	rows := [][]string{
		{"outcome", string(r.Outcome)},
		{"tenant", escapeControl(r.Tenant)},
		{"operation_id", escapeControl(r.OperationID)},
		{"class", r.Class},
		{"response", cmdutil.OrDash(string(r.Response))},
		{"incoming_hash", cmdutil.OrDash(r.IncomingHash)},
		{"stored_hash", cmdutil.OrDash(r.StoredHash)},
	}
	if r.StoredClass != "" {
		rows = append(rows, []string{"stored_class", r.StoredClass})
	}
	if r.QuarantineID != 0 {
		rows = append(rows, []string{"quarantine_id", fmt.Sprint(r.QuarantineID)})
	}
	if len(r.Changes) > 0 {
		rows = append(rows, []string{"changed", describeChanges(r.Changes)})
	}
	if r.Err != nil {
		rows = append(rows, []string{"error", cmdutil.OneLine(r.Err.Error())})
	}
	if r.Note != "" {
		rows = append(rows, []string{"note", r.Note})
	}
	if d := r.Redrive; d != nil {
		rows = append(rows, []string{"re-drive", fmt.Sprintf("%s %s: %d attempt(s), replies %s, verified on the primary: %s",
			d.Via, d.Target, d.Attempts, strings.Join(d.Replies, ", "), d.Verified)})
	}
	if meaning := outcomeMeaning[r.Outcome]; meaning != "" {
		rows = append(rows, []string{"meaning", meaning})
	}
	return cmdutil.PrintTable(w, []string{"field", "value"}, rows)
}

// digestFile reads an input file once, before the run: its number of lines
// that are not blank (the progress total: a run skips blank lines, and
// answers every other one) and its SHA-256 (hex), then rewinds it.
func digestFile(file *os.File) (lines int64, sum string, err error) {
	h := sha256.New()
	r := bufio.NewReaderSize(io.TeeReader(file, h), 1<<20)
	blank := true // the line read so far holds only white space
	for {
		chunk, rerr := r.ReadSlice('\n')
		if len(bytes.TrimSpace(chunk)) > 0 {
			blank = false
		}
		ended := len(chunk) > 0 && chunk[len(chunk)-1] == '\n'
		if ended || (rerr == io.EOF && len(chunk) > 0) {
			if !blank {
				lines++
			}
			blank = true
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil && rerr != bufio.ErrBufferFull {
			return 0, "", rerr
		}
	}
	if _, err := file.Seek(0, io.SeekStart); err != nil {
		return 0, "", err
	}
	return lines, hex.EncodeToString(h.Sum(nil)), nil
}

// spoolStdin copies stdin to a temporary file (removed at once: it lives
// while open), since a run reads its input twice: once to find the
// identities it holds with two payloads, once to answer them.
func spoolStdin(in io.Reader) (*os.File, error) {
	file, err := os.CreateTemp("", "idemctl-resolve-*.ndjson")
	if err != nil {
		return nil, fmt.Errorf("spool stdin: %w", err)
	}
	_ = os.Remove(file.Name())
	if _, err := io.Copy(file, in); err != nil {
		file.Close()
		return nil, fmt.Errorf("spool stdin: %w", err)
	}
	if _, err := file.Seek(0, io.SeekStart); err != nil {
		file.Close()
		return nil, fmt.Errorf("spool stdin: %w", err)
	}
	return file, nil
}

// createReport creates the --report file; an existing file is kept unless
// overwrite is set (a report is evidence: a rerun must not truncate it).
func createReport(path string, overwrite bool) (*os.File, error) {
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if overwrite {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return nil, cmdutil.WithCode(cmdutil.ExitUsage, errReportExists(path))
	}
	if err != nil {
		return nil, fmt.Errorf("create report: %w", err)
	}
	return f, nil
}

func errReportExists(path string) error {
	return fmt.Errorf("--report %s already exists: choose another file, or pass --overwrite to replace it", path)
}
