// Package reconcile holds the commands that compare the inbox with the world:
// `idemctl reconcile` (against an external report), `idemctl intake` (the
// ambiguous list built from a replay source, a resolve batch) and `idemctl
// suspects` (operations that differ only in their operation id).
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/db"
	"github.com/idemctl/idemctl/reconcile"
	"github.com/idemctl/idemctl/recovery"
)

// ReconcileOptions are the flags of `idemctl reconcile`.
type ReconcileOptions struct {
	IO   *cmdutil.IOStreams
	JSON bool

	// Mapping is the mapping in force: --mapping's file, overridden by flags.
	Mapping     reconcile.Mapping
	MappingFile string
	// SaveMapping writes the mapping to this file instead of running.
	SaveMapping string
	EmitResolve string
	EmitRecord  string
	Overwrite   bool
	Pin         bool
	MaxPins     int
	BatchSize   int
	// SortBufferMiB is the report sorted in memory at once.
	SortBufferMiB int
	TempDir       string
	Operator      string

	f *cmdutil.Factory
}

// reconcileLong is the help of `idemctl reconcile`.
const reconcileLong = `Compare the inbox of one operation class with the system of record: a payment
provider's or a bank's settlement report, CSV with a header line or NDJSON
(one object a line), gzipped or not, "-" for stdin. The report is streamed:
its lines are sorted by identity on disk in bounded chunks (--sort-buffer)
and merged with the inbox read in identity order, so memory stays bounded on
millions of lines.

--key maps the identity: tenant=COLUMN,operation_id=COLUMN (or a fixed
--tenant). --compare maps fields of the stored payload (JSON Pointers) to
report columns: /amount=amount_minor,/currency=currency. A stored number is
compared as a number (1250 = 1250.00), anything else exactly. In NDJSON a
column is a member name or a JSON Pointer (/money/minor). The column mapped to
--amount (default /amount) must hold a plain decimal on every line.

--profile NAME reads an export as it comes (stripe-balance-itemized,
adyen-settlement); --profile-file FILE a profile of your own: key and compared
columns, amount unit, row filter, kinds of rows that reverse an operation,
delimiter, decimal separator (docs/reconcile-profiles.md). Flags win over the
profile. --amount-unit major reads 12.50 EUR as 1250 and 1250 JPY as 1250 (the
ISO 4217 exponent; the profile may override it per currency); more decimals
than the currency has, or a code that is not ISO 4217, is invalid. Currency
codes compare whatever their case. --where COLUMN=VALUE keeps only the rows
that are operations (fees and payouts are left out, and counted).

--since and --until (a date, UTC midnight; an RFC 3339 time; today;
yesterday) bound created_at of the inbox operations the report must hold
(since inclusive, until exclusive). Every report line is looked up whatever
its time.

Each finding is one line (-o json: one object a line, with "status"):
  matched            in both, every compared field equal
  mismatch           in both, a field differs (its JSON Pointer, both values),
                     or the identity is recorded under another class
  missing_in_inbox   the report settled an operation the inbox never recorded:
                     money moved with no record, the worst case
  missing_in_report  recorded in the window, not in the report (not settled
                     yet, or lost downstream)
  refunded           matched, and reversed whole by refund or chargeback rows
  partially_refunded matched, and reversed in part (the rows and their sum)
  duplicate_in_report the operation's own row is on two lines (both named);
                     the first is compared
  invalid            a report line that cannot be used: its line number and why
                     (not CSV, with the line and column; no identity; an amount
                     that is not a number, or has too many decimals)
then a summary: counts per status and amounts per currency per status, as the
inbox and as the report have them (-o json: a last line {"summary": ...}).
Nothing is printed before the whole report has been read; then the invalid
lines without an identity come first, in line order, and everything else in
identity order (tenant, then operation id).

--emit-resolve FILE writes the missing_in_report operations, with their stored
payloads, as a resolve batch (idemctl resolve --file FILE); an existing FILE is
replaced only with --overwrite. --emit-record FILE writes the missing_in_inbox
lines as the input of idemctl record plan (one JSON object a line: tenant_id,
operation_id, class, a payload of the compared fields, a stand-in response,
and the evidence: the report's name, SHA-256 and line, the provider's
reference and the amount); nothing is recorded: a person checks the lines and
plans them, another approves (docs/reconcile.md). --pin records every discrepancy as a pending
manual correction (idemctl corrections list), with the report's name and line
in its reason, so that no purge removes its evidence while it is open (a
discrepancy pinned with the same reason before is not pinned twice; more than
--max-pins pins nothing). A report with invalid lines is reconciled, but
nothing is emitted or pinned. A report that cannot be read at all (empty,
truncated, a mapped column missing) is refused: nothing is printed, written
or recorded. Every run is recorded in the audit log with the report's SHA-256.

--mapping FILE reads the flags from a saved mapping (JSON, the same names:
{"class": ..., "report": ..., "key": ..., "compare": ...}; flags given as
well win); --save-mapping FILE writes one and runs nothing (the TUI's
reconcile view runs the mappings in ~/.config/idemctl/reconcile).`

// NewCmdReconcile builds `idemctl reconcile`.
func NewCmdReconcile(f *cmdutil.Factory, runF func(*ReconcileOptions) error) *cobra.Command {
	opts := &ReconcileOptions{IO: f.IO, f: f}
	var flags reconcile.Mapping
	cmd := &cobra.Command{
		Use:   "reconcile --class C --report FILE --key tenant=COL,operation_id=COL [--compare /ptr=COL,...]",
		Short: "Compare one class's inbox with an external report (a settlement file)",
		Long:  reconcileLong,
		Example: `  # yesterday's settlement of the demo ledger
  idemctl reconcile --class demo.transfer --report settlement.csv \
    --key tenant=merchant,operation_id=reference \
    --compare /amount=amount_minor,/currency=currency \
    --since 2026-11-01 --until 2026-11-02

  # JSON lines, discrepancies only
  idemctl reconcile --mapping psp.json -o json | jq 'select(.status != "matched" and .status != null)'

  # turn findings into work: a resolve batch, and pins against purges
  idemctl reconcile --mapping psp.json --emit-resolve unsettled.ndjson --pin
  idemctl resolve --file unsettled.ndjson --dry-run

  # money moved with no record: the input of a four-eyes record plan
  idemctl reconcile --mapping psp.json --emit-record unrecorded.ndjson
  idemctl record plan --file unrecorded.ndjson --reason "PSP settled, never recorded (INC-9)" --contract PSP-2024-7

  # a Stripe itemized balance report as downloaded (BOM, decimals, refunds, fees)
  idemctl reconcile --class demo.transfer --tenant acme --profile stripe-balance-itemized \
    --report balance_change_from_activity.itemized.csv

  # an Adyen settlement details report, only settled payments and refunds
  idemctl reconcile --class demo.transfer --tenant acme --profile adyen-settlement \
    --report settlement_detail_report_batch_42.csv --where 'Type=Settled|Refunded'

  # a gzipped NDJSON report from a pipe, one merchant
  zcat psp-2026-11-01.ndjson.gz | idemctl reconcile --class demo.transfer --report - \
    --tenant acme --key operation_id=/ref/id --compare /amount=/money/minor

  # save the flags for the TUI
  idemctl reconcile --class demo.transfer --report /srv/psp/settlement.csv \
    --key tenant=merchant,operation_id=reference --compare /amount=amount_minor \
    --since yesterday --until today --save-mapping ~/.config/idemctl/reconcile/psp.json`,
		Args: cmdutil.MaxArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.resolveMapping(cmd.Flags(), flags); err != nil {
				return err
			}
			if opts.MaxPins < 1 || opts.BatchSize < 1 || opts.BatchSize > 100000 || opts.SortBufferMiB < 1 {
				return cmdutil.UsageErr("--max-pins, --batch-size (at most 100000) and --sort-buffer must be positive")
			}
			opts.JSON, opts.Operator = f.JSON(), f.Operator()
			if opts.SaveMapping != "" {
				return opts.save()
			}
			if runF != nil {
				return runF(opts)
			}
			return reconcileRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&flags.Class, "class", "", "the operation class reconciled (e.g. demo.transfer)")
	fl.StringVar(&flags.Report, "report", "", "the report: CSV with a header, or NDJSON; gzip accepted; - for stdin")
	fl.StringVar((*string)(&flags.Format), "format", "", "csv or ndjson (default: from the content)")
	fl.StringVar(&flags.Delimiter, "delimiter", "", "CSV field separator (default ,)")
	fl.StringVar(&flags.Key, "key", "", "identity columns: tenant=COLUMN,operation_id=COLUMN")
	fl.StringVar(&flags.Tenant, "tenant", "", "a fixed tenant, for a report without a tenant column")
	fl.StringVar(&flags.Compare, "compare", "", "compared fields: /POINTER=COLUMN,... (a stored number compares as a number)")
	fl.StringVar(&flags.Amount, "amount", "", "JSON Pointer of the amount in the payload, for the totals (default "+reconcile.DefaultAmount+")")
	fl.StringVar(&flags.Currency, "currency", "", "JSON Pointer of the currency in the payload (default "+reconcile.DefaultCurrency+")")
	fl.StringVar(&flags.Since, "since", "", "inbox operations created at or after: DATE (UTC), RFC 3339, today, yesterday")
	fl.StringVar(&flags.Until, "until", "", "inbox operations created before: DATE (UTC), RFC 3339, today, yesterday")
	fl.StringVar(&flags.Profile, "profile", "", "read the report as this export: "+strings.Join(reconcile.ProfileNames(), ", "))
	fl.StringVar(&flags.ProfileFile, "profile-file", "", "read the report as this profile file says (JSON, docs/reconcile-profiles.md)")
	fl.StringVar(&flags.AmountUnit, "amount-unit", "", "major (12.50, by the currency's ISO 4217 exponent) or minor (1250, the default)")
	fl.StringVar(&flags.DecimalSeparator, "decimal-separator", "", "the amounts' decimal separator: . (default) or ,")
	fl.StringArrayVar(&flags.Where, "where", nil, "keep only the rows whose COLUMN is VALUE (COLUMN=V1|V2; repeat: all must hold; replaces the profile's)")
	fl.StringVar(&opts.MappingFile, "mapping", "", "read the mapping from this saved file (flags win)")
	fl.StringVar(&opts.SaveMapping, "save-mapping", "", "write the mapping to this file and exit")
	fl.StringVar(&opts.EmitResolve, "emit-resolve", "", "write the missing_in_report operations to this file as a resolve batch")
	fl.StringVar(&opts.EmitRecord, "emit-record", "", "write the missing_in_inbox lines to this file as the input of idemctl record plan")
	fl.BoolVar(&opts.Overwrite, "overwrite", false, "let --emit-resolve, --emit-record and --save-mapping replace an existing file")
	fl.BoolVar(&opts.Pin, "pin", false, "record every discrepancy as a pending manual correction (pins it against purges)")
	fl.IntVar(&opts.MaxPins, "max-pins", reconcile.DefaultMaxPins, "pin nothing when there are more discrepancies than this")
	fl.IntVar(&opts.BatchSize, "batch-size", reconcile.DefaultBatchSize, "identities per lookup, inbox rows per fetch")
	fl.IntVar(&opts.SortBufferMiB, "sort-buffer", reconcile.DefaultChunkBytes>>20, "MiB of report sorted in memory at once")
	fl.StringVar(&opts.TempDir, "temp-dir", "", "where the sorted chunks go (default: the system's temporary directory)")
	return cmd
}

// resolveMapping reads --mapping, lays the flags given over it, and checks
// the result.
func (o *ReconcileOptions) resolveMapping(fl *pflag.FlagSet, flags reconcile.Mapping) error {
	m := flags
	if o.MappingFile != "" {
		var err error
		if m, err = reconcile.LoadMapping(o.MappingFile); err != nil {
			return cmdutil.WithCode(cmdutil.ExitUsage, err)
		}
		over := map[string]func(){
			"class": func() { m.Class = flags.Class }, "report": func() { m.Report = flags.Report },
			"format": func() { m.Format = flags.Format }, "delimiter": func() { m.Delimiter = flags.Delimiter },
			"key": func() { m.Key = flags.Key }, "tenant": func() { m.Tenant = flags.Tenant },
			"compare": func() { m.Compare = flags.Compare }, "amount": func() { m.Amount = flags.Amount },
			"currency": func() { m.Currency = flags.Currency }, "since": func() { m.Since = flags.Since },
			"until":   func() { m.Until = flags.Until },
			"profile": func() { m.Profile = flags.Profile }, "profile-file": func() { m.ProfileFile = flags.ProfileFile },
			"amount-unit": func() { m.AmountUnit = flags.AmountUnit }, "where": func() { m.Where = flags.Where },
			"decimal-separator": func() { m.DecimalSeparator = flags.DecimalSeparator },
		}
		for name, set := range over {
			if fl.Changed(name) {
				set()
			}
		}
	}
	if _, err := m.Check(o.f.Now()); err != nil {
		return cmdutil.WithCode(cmdutil.ExitUsage, err)
	}
	o.Mapping = m
	return nil
}

// save writes the mapping file.
func (o *ReconcileOptions) save() error {
	if err := reconcile.SaveMapping(o.SaveMapping, o.Mapping, o.Overwrite); err != nil {
		return cmdutil.WithCode(cmdutil.ExitUsage, err)
	}
	_, err := fmt.Fprintf(o.IO.Out, "saved mapping %s\n", o.SaveMapping)
	return err
}

func reconcileRun(ctx context.Context, opts *ReconcileOptions) error {
	pool, err := opts.f.OpenPool(ctx, db.Options{MaxConns: 4})
	if err != nil {
		return err
	}
	defer pool.Close()
	cfg := reconcile.Config{Mapping: opts.Mapping, Input: opts.IO.In, Operator: opts.Operator,
		EmitResolve: opts.EmitResolve, EmitRecord: opts.EmitRecord, Overwrite: opts.Overwrite, Pin: opts.Pin, MaxPins: opts.MaxPins,
		BatchSize: opts.BatchSize, ChunkBytes: opts.SortBufferMiB << 20, TempDir: opts.TempDir, Now: opts.f.Now}
	var shown []reconcile.Finding
	more := 0
	emit := func(x reconcile.Finding) error {
		if opts.JSON {
			return cmdutil.PrintJSONLine(opts.IO.Out, x)
		}
		if x.Status.Discrepancy() || x.Status == reconcile.Invalid {
			if len(shown) < cmdutil.MaxAttentionRows {
				shown = append(shown, x)
			} else {
				more++
			}
		}
		return nil
	}
	sum, err := reconcile.Run(ctx, pool, cfg, emit)
	if err != nil && sum.StartedAt.IsZero() {
		return reconcileRefused(opts, err)
	}
	if perr := printReconcile(opts, sum, shown, more); perr != nil && err == nil {
		err = fmt.Errorf("%w: %v", reconcile.ErrWriteResults, perr)
	}
	return reconcileExit(opts, sum, err)
}

// reconcileRefused is the one line of a run that compared nothing.
func reconcileRefused(opts *ReconcileOptions, err error) error {
	switch {
	case errors.Is(err, recovery.ErrNotPrimary):
		return cmdutil.WithCode(cmdutil.ExitNotPrimary, fmt.Errorf("%s: %w", db.Describe(opts.f.DSN()), err))
	case errors.Is(err, reconcile.ErrInvalidReport):
		return cmdutil.WithCode(cmdutil.ExitInvalid, fmt.Errorf("%w; nothing was written", err))
	case errors.Is(err, reconcile.ErrInvalidMapping), errors.Is(err, reconcile.ErrFileExists):
		return cmdutil.WithCode(cmdutil.ExitUsage, err)
	}
	return cmdutil.WithCode(cmdutil.ExitFailure, err)
}

// reconcileExit is the exit code of a run that compared: 5 invalid lines, 3
// discrepancies, 0 all matched; 1 when it did not finish, or was not
// recorded.
func reconcileExit(opts *ReconcileOptions, sum reconcile.Summary, err error) error {
	var recErr *reconcile.RecordError
	onlyRecord := errors.As(err, &recErr) && err == error(recErr)
	switch {
	case onlyRecord:
		fmt.Fprintln(opts.IO.ErrOut, "idemctl: warning: "+cmdutil.OneLine(recErr.Error()))
	case err != nil:
		return cmdutil.WithCode(cmdutil.ExitFailure, fmt.Errorf("reconcile: %w", err))
	}
	switch {
	case sum.Counts[reconcile.Invalid] > 0:
		return cmdutil.SilentExit{Code: cmdutil.ExitInvalid}
	case sum.Discrepancies() > 0:
		return cmdutil.SilentExit{Code: cmdutil.ExitConflict}
	case onlyRecord:
		return cmdutil.SilentExit{Code: cmdutil.ExitFailure}
	}
	return nil
}

// printReconcile writes the summary: a JSON line, or tables.
func printReconcile(opts *ReconcileOptions, sum reconcile.Summary, shown []reconcile.Finding, more int) error {
	if opts.JSON {
		fmt.Fprintln(opts.IO.ErrOut, "reconcile: "+reconcileLine(sum))
		return cmdutil.PrintJSONLine(opts.IO.Out, map[string]any{"summary": sum})
	}
	w := opts.IO.Out
	fmt.Fprintln(w, "reconcile: "+reconcileLine(sum))
	if err := cmdutil.PrintTable(w, []string{"status", "count", "currency", "inbox amount", "report amount"}, reconcileRows(sum)); err != nil {
		return err
	}
	if sum.NotCompared > 0 {
		fmt.Fprintf(w, "Not compared: %s counted above (matched or refunded) had their bodies purged: only the identity's tombstone is left, no field was compared (-o json or --all names them).\n",
			cmdutil.CountOf(sum.NotCompared, "operation"))
	}
	if len(shown) > 0 {
		fmt.Fprintln(w, "Discrepancies and invalid lines:")
		rows := make([][]string, 0, len(shown))
		for _, x := range shown {
			rows = append(rows, []string{cmdutil.OrDash(lineNumber(x.Line)), x.Tenant, x.OperationID, string(x.Status), x.Detail()})
		}
		if err := cmdutil.PrintTable(w, []string{"line", "tenant", "operation_id", "status", "detail"}, rows); err != nil {
			return err
		}
		if more > 0 {
			fmt.Fprintf(w, "... and %s more: use -o json for every line.\n", cmdutil.HumanCount(int64(more)))
		}
	}
	return printReconcileActions(w, sum)
}

// printReconcileActions says what the run wrote besides its output.
func printReconcileActions(w io.Writer, sum reconcile.Summary) error {
	var lines []string
	if sum.EmitFile != "" {
		lines = append(lines, fmt.Sprintf("Resolve batch: %s (%s): idemctl resolve --file %s --dry-run", sum.EmitFile, cmdutil.CountOf(int64(sum.Emitted), "operation"), sum.EmitFile))
	}
	if sum.RecordFile != "" {
		lines = append(lines, fmt.Sprintf("Record plan input: %s (%s; nothing recorded): check each line, then idemctl record plan --file %s --reason TEXT",
			sum.RecordFile, cmdutil.CountOf(sum.RecordLines, "operation"), sum.RecordFile))
	}
	if sum.Pinned > 0 || sum.AlreadyPinned > 0 {
		lines = append(lines, fmt.Sprintf("Pinned %d discrepancies as manual corrections (%d were pinned already): idemctl corrections list", sum.Pinned, sum.AlreadyPinned))
	}
	if sum.Withheld != "" {
		lines = append(lines, "Withheld: "+sum.Withheld)
	}
	if sum.AuditID != 0 {
		lines = append(lines, fmt.Sprintf("Recorded as audit row %d (report sha256:%s).", sum.AuditID, sum.Report.SHA256))
	}
	_, err := fmt.Fprintln(w, strings.Join(lines, "\n"))
	return err
}

// reconcileRows are the summary table's rows: one per status and currency.
func reconcileRows(sum reconcile.Summary) [][]string {
	var rows [][]string
	for _, st := range reconcile.Statuses {
		n := sum.Counts[st]
		curs := sum.Currencies(st)
		if len(curs) == 0 {
			rows = append(rows, []string{string(st), cmdutil.HumanCount(n), "", "", ""})
			continue
		}
		for i, c := range curs {
			t := sum.Amounts[st][c]
			first := []string{string(st), cmdutil.HumanCount(n)}
			if i > 0 {
				first = []string{"", ""}
			}
			rows = append(rows, append(first, cmdutil.OrDash(c), cmdutil.OrDash(t.Inbox), cmdutil.OrDash(t.Report)))
		}
	}
	return append(rows, []string{"total", cmdutil.HumanCount(sum.Total()), "", "", ""})
}

// reconcileLine is the one-line summary.
func reconcileLine(sum reconcile.Summary) string {
	window := ""
	switch {
	case sum.Since != nil && sum.Until != nil:
		window = fmt.Sprintf(", created from %s to %s", rfc3339(*sum.Since), rfc3339(*sum.Until))
	case sum.Since != nil:
		window = ", created since " + rfc3339(*sum.Since)
	case sum.Until != nil:
		window = ", created before " + rfc3339(*sum.Until)
	}
	var parts []string
	for _, st := range reconcile.Statuses {
		if n := sum.Counts[st]; n > 0 {
			parts = append(parts, cmdutil.HumanCount(int64(n))+" "+string(st))
		}
	}
	line := fmt.Sprintf("%s (%s lines, sha256 %.16s…) against %s%s", sum.Report.Name, cmdutil.HumanCount(int64(sum.Report.Lines)), sum.Report.SHA256, sum.Class, window)
	if len(parts) > 0 {
		line += ": " + strings.Join(parts, ", ")
	}
	if sum.NotCompared > 0 {
		line += fmt.Sprintf(" (of which %s not compared: body purged)", cmdutil.HumanCount(sum.NotCompared))
	}
	if sum.Interrupted {
		line += "; did not finish"
	}
	return line
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func lineNumber(n int64) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprint(n)
}
