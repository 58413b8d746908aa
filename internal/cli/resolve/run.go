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
	"time"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/db"
	"github.com/idemctl/idemctl/recovery"
	"github.com/idemctl/idemctl/redrive"
)

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
	if opts.DryRun && !single {
		defer collectForDryRun()()
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
			if err := printResolveResult(opts.IO.Out, *only, sum.DryRun); err != nil {
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
