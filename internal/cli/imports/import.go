// Package imports holds `idemctl import` (plan, approve, run): an existing
// idempotency store adopted into the inbox, with a second person. (The
// package is not named import, a Go keyword.)
package imports

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/governance"
	"github.com/idemctl/idemctl/importer"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/cli/record"
	"github.com/idemctl/idemctl/internal/db"
)

// NewCmdImport builds `idemctl import` (plan, approve, run): an existing
// idempotency store adopted into a class's inbox through a four-eyes entry
// plan of kind import.
func NewCmdImport(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "import <command>",
		Short: "Adopt an existing idempotency store into the inbox, with a second person (plan, approve, run, abort)",
		Long: `Adopt the idempotency store a service kept before idemctl (rocket-rides'
idempotency_keys, an HTTP middleware's table, an NDJSON export): each finished
operation enters the class's inbox with its payload's canonical text and hash,
its saved response and its ORIGINAL created_at, and its effect is NOT run; a
later retry of it answers already_applied with the original response.

One person plans, reading the source streaming (progress on stderr). Rows are
sorted out while planning: finished rows are imported; unfinished, locked or
response-less rows (a JSON null response is none) go to the --ambiguous file,
in idemctl resolve's input format; rows with a NULL or future created_at, a
payload over the limit or ids that break the identity rules are invalid lines
with the reason. Off Citus the plan stages the canonical rows in the
database, which checks them and seals the plan with its own digest of them;
on Citus the plan keeps a fingerprint of each row instead of the row.

Another person approves, reading the source again (import approve takes the
same source flags): the database approves only if what it gives is exactly
the plan (the staged rows' digest, or each fingerprint), so a plan its source
does not give is never approved. Then it runs as the schema owner's
functions: a staged plan enters its stage by chunks, without reading the
source (the approval compared it with the stage: what enters is what was
approved); on Citus the run reads the source again (the same flags) and
enters the rows only if they are exactly the planned ones. At run
time an identity the inbox already holds with the same payload is skipped,
with another payload quarantined with both sides: nothing is overwritten.

An import cites what a record of its class cites: --contract for a money
class (the approval shows the money per currency), --correction for a class
with a SQL effect (who wrote the imported operations' effects).

The plan prints a cursor (the last created_at/tenant/operation read): run the
import again with --since CURSOR right before the cutover to take only what
came after. docs/import.md is the cutover, step by step.`,
		Example: `  export IDEMCTL_SOURCE_RIDES_PASSWORD=...
  idemctl import plan --class rides.charge \
      --from-postgres "postgres://reader@db1/rides" \
      --password-env IDEMCTL_SOURCE_RIDES_PASSWORD \
      --query "$(cat rides-import.sql)" \
      --ambiguous ambiguous.ndjson --contract "PSP-2024-7" \
      --correction "charges posted by rocket-rides' own ledger" --reason "adopt rocket-rides (MIG-1)"
  idemctl import approve 4 --from-postgres "postgres://reader@db1/rides" \
      --password-env IDEMCTL_SOURCE_RIDES_PASSWORD \
      --query "$(cat rides-import.sql)"     # another person
  idemctl import abort 4 --reason "wrong source"   # or: end it, its stage dropped
  idemctl import run 4                # on Citus: with the source flags`,
	}
	cmd.AddCommand(NewCmdImportPlan(f, nil), newCmdImportStep(f, "approve"), newCmdImportStep(f, "run"),
		record.NewCmdEntryAbort(f, "import", func(p governance.EntryPlan) error {
			if err := showImportPlan(f, p); err != nil {
				return err
			}
			fmt.Fprintf(f.IO.ErrOut, "import plan %d aborted: nothing entered, its stage is dropped\n", p.ID)
			return nil
		}))
	return cmd
}

// ImportPlanOptions are the flags of `idemctl import plan`.
type ImportPlanOptions struct {
	Class, Reason       string
	Contract            string
	Correction          string
	FromPostgres, Query string
	PasswordEnv         string
	FromNDJSON          string
	Since, HashFunction string
	SinceOverlap        time.Duration
	Ambiguous, Invalid  string
	OverwriteAmbiguous  bool
	ProgressEvery       time.Duration
}

// NewCmdImportPlan builds `idemctl import plan`; runF replaces the run in tests.
func NewCmdImportPlan(f *cmdutil.Factory, runF func(*ImportPlanOptions) error) *cobra.Command {
	o := &ImportPlanOptions{}
	cmd := &cobra.Command{
		Use:   "plan --class C (--from-postgres DSN --query SQL [--password-env VAR] | --from-ndjson FILE) --ambiguous FILE --reason TEXT",
		Short: "Plan an import from a store; nothing enters until another person approves",
		Long: `Read a store and plan the import of its finished operations into class C.

--from-postgres DSN --query SQL: the DSN holds no password (as a replay
source's: --password-env names an IDEMCTL_SOURCE_* variable that holds it);
the query runs in a read-only transaction and returns columns named
tenant_id, operation_id, payload (or request_hash, for a store that kept
only its own hash of the request), response, created_at, status ('finished'
for a completed operation) and optionally locked (boolean).
--from-ndjson FILE: one JSON object a line with the same fields.

An import lets identities in without their effect running, as a record
does, and cites what a record cites (checked when it is planned, approved
and run): a money class needs --contract, the business contract the
approver checks the imported amounts against (the approval shows their
totals per currency); a class with a SQL effect needs --correction, who
wrote the effects of the imported operations (the import does not run
them: the old service's ledger, say).

--hash-function says how a hash-only store computed request_hash:
sha256-raw (of the request body's bytes) or sha256-sorted-json (of the JSON
with sorted keys and no whitespace, RFC 8785). Without it, every retry of
such an identity is a quarantined conflict "imported without its payload".

--since CURSOR (printed by the last import) reads the rows after it and
again those stamped up to --since-overlap before it: 24h when the flag is
not given, none with --since-overlap 0.

Exit code 5 when some rows were invalid (the plan holds the others).`,
		Example: `  idemctl import plan --class rides.charge --from-ndjson keys.ndjson --ambiguous ambiguous.ndjson \
      --contract "PSP-2024-7" --correction "charges posted by rocket-rides' own ledger" \
      --reason "adopt rocket-rides (MIG-1)"
  idemctl import plan --class rides.charge --from-ndjson keys.ndjson --ambiguous late.ndjson \
      --since 2026-11-30T23:59:58.123456Z/42/key-9001 --contract "PSP-2024-7" \
      --correction "charges posted by rocket-rides' own ledger" --reason "cutover (MIG-1)"`,
		Args: cmdutil.MaxArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(o)
			}
			return importPlanRun(cmd, f, o)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Class, "class", "", "the operation class the store's operations belong to")
	fl.StringVar(&o.FromPostgres, "from-postgres", "", "DSN of the store's database (no password in it)")
	fl.StringVar(&o.Query, "query", "", "with --from-postgres: the query returning the store's rows")
	fl.StringVar(&o.PasswordEnv, "password-env", "", "with --from-postgres: the environment variable (IDEMCTL_SOURCE_...) holding the password")
	fl.StringVar(&o.FromNDJSON, "from-ndjson", "", "an NDJSON export of the store")
	fl.StringVar(&o.Since, "since", "", "the cursor a previous import printed: read only the rows after it, less --since-overlap")
	fl.DurationVar(&o.SinceOverlap, "since-overlap", importer.DefaultSinceOverlap, "with --since, read again the rows stamped this long before the cursor (a row that committed late is not lost; what the inbox holds is skipped); 0: none")
	fl.StringVar(&o.HashFunction, "hash-function", "", "how a hash-only store hashed its requests: sha256-raw or sha256-sorted-json")
	fl.StringVar(&o.Ambiguous, "ambiguous", "", "write the unfinished rows here, in idemctl resolve's input format (required)")
	fl.BoolVar(&o.OverwriteAmbiguous, "overwrite", false, "let --ambiguous and --invalid replace existing files")
	fl.StringVar(&o.Invalid, "invalid", "", "write the invalid rows here, one JSON object a line (default: stderr)")
	fl.StringVar(&o.Reason, "reason", "", "why (required)")
	fl.StringVar(&o.Contract, "contract", "", "the business contract the approver checks the imported amounts against (required for a money class)")
	fl.StringVar(&o.Correction, "correction", "", "who wrote the effects of the imported operations, which the import does not run (required for a class with a SQL effect)")
	fl.DurationVar(&o.ProgressEvery, "progress", 2*time.Second, "how often a progress line is printed on stderr (0: never)")
	return cmd
}

func (o *ImportPlanOptions) validate() error {
	if o.Class == "" || o.Reason == "" || o.Ambiguous == "" {
		return cmdutil.UsageErr("--class, --ambiguous and --reason are required")
	}
	pg, file := o.FromPostgres != "", o.FromNDJSON != ""
	if pg == file {
		return cmdutil.UsageErr("give --from-postgres DSN --query SQL, or --from-ndjson FILE")
	}
	if pg && o.Query == "" {
		return cmdutil.UsageErr("--from-postgres needs --query")
	}
	if !pg && (o.Query != "" || o.PasswordEnv != "") {
		return cmdutil.UsageErr("--query and --password-env go with --from-postgres")
	}
	if o.HashFunction != "" && o.HashFunction != importer.SHA256Raw && o.HashFunction != importer.SHA256SortedJSON {
		return cmdutil.UsageErr("--hash-function: sha256-raw or sha256-sorted-json")
	}
	if o.Since != "" {
		if _, err := importer.ParseCursor(o.Since); err != nil {
			return cmdutil.UsageErr("--since: %v", err)
		}
	}
	if o.SinceOverlap < 0 {
		return cmdutil.UsageErr("--since-overlap %s: want 0 (read from the cursor) or more", o.SinceOverlap)
	}
	return nil
}

func createOutput(path string, overwrite bool) (*os.File, error) {
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if !overwrite {
		flags |= os.O_EXCL
	}
	out, err := os.OpenFile(path, flags, 0o600)
	if errors.Is(err, os.ErrExist) {
		return nil, cmdutil.UsageErr("%s exists: give another file, or --overwrite", path)
	}
	return out, err
}

func importPlanRun(cmd *cobra.Command, f *cmdutil.Factory, o *ImportPlanOptions) error {
	ctx := cmd.Context()
	var since *importer.Cursor
	if o.Since != "" {
		c, _ := importer.ParseCursor(o.Since)
		since = &c
	}
	pool, err := f.Pool(ctx)
	if err != nil {
		return err
	}
	// importer.Plan asks for the class (unknown, or lacking a citation)
	// before it opens the source: no row read, no file created.
	out := &planOutputs{o: o, invalid: f.IO.ErrOut}
	defer out.close()
	start := time.Now()
	var progress func(importer.Counts)
	if o.ProgressEvery > 0 {
		progress = func(c importer.Counts) {
			rate := float64(c.Read) / time.Since(start).Seconds()
			fmt.Fprintf(f.IO.ErrOut, "import: %d rows read: %d to import, %d ambiguous, %d invalid (%.0f rows/s)\n",
				c.Read, c.ToImport, c.Ambiguous, c.Invalid, rate)
		}
	}
	res, err := importer.Plan(ctx, pool, out.opened(o.opener()), importer.PlanOptions{Class: o.Class, Operator: f.Operator(), Reason: o.Reason,
		Contract: o.Contract, Correction: o.Correction,
		HashFunction: o.HashFunction, Since: since, SinceOverlap: o.SinceOverlap, Progress: progress, ProgressEvery: o.ProgressEvery}, importer.Sinks{Ambiguous: out.ambiguousSink(), Invalid: out.invalidSink()})
	if errors.Is(err, importer.ErrNothingToImport) {
		fmt.Fprintf(f.IO.ErrOut, "nothing to import: %d rows read (%d ambiguous, %d invalid); no plan stored\n",
			res.Counts.Read, res.Counts.Ambiguous, res.Counts.Invalid)
		printCursorHint(f, res)
		return invalidExit(res.Counts)
	}
	if err != nil {
		out.remove() // no plan stored: no --ambiguous or --invalid list of it either
		return cmdutil.GovernanceErr(err)
	}
	if err := showImportPlan(f, res.Plan); err != nil {
		return err
	}
	c := res.Counts
	fmt.Fprintf(f.IO.ErrOut, "%d rows read: %d to import (%d hash-only), %d ambiguous (in %s), %d invalid\n",
		c.Read, c.ToImport, c.HashOnly, c.Ambiguous, o.Ambiguous, c.Invalid)
	printCursorHint(f, res)
	var twice struct {
		N int `json:"identities_twice"`
	}
	if json.Unmarshal(res.Plan.Counts, &twice) == nil && twice.N > 0 {
		fmt.Fprintf(f.IO.ErrOut, "warning: identities the source holds more than once: %d; its run will be refused: deduplicate the query (one row per tenant and key) and plan again\n", twice.N)
	}
	fmt.Fprintf(f.IO.ErrOut, "nothing entered yet: another person approves it with idemctl import approve %d\n", res.Plan.ID)
	return invalidExit(c)
}

// planOutputs are the plan's --ambiguous and --invalid files, created once
// its source is open: a source that cannot be read leaves no file behind
// and an existing one untouched, as before any row is read.
type planOutputs struct {
	o        *ImportPlanOptions
	amb, inv *os.File
	invalid  io.Writer // stderr without --invalid
}

// opened opens the source, then the files (an existing one without
// --overwrite: exit 2, the source closed).
func (p *planOutputs) opened(open importer.Opener) importer.Opener {
	return func(ctx context.Context, since *importer.Cursor, ordered bool) (importer.Source, error) {
		src, err := open(ctx, since, ordered)
		if err != nil {
			return nil, err
		}
		if p.amb, err = createOutput(p.o.Ambiguous, p.o.OverwriteAmbiguous); err == nil && p.o.Invalid != "" {
			if p.inv, err = createOutput(p.o.Invalid, p.o.OverwriteAmbiguous); err == nil {
				p.invalid = p.inv
			}
		}
		if err != nil {
			src.Close()
			return nil, err
		}
		return src, nil
	}
}

// The sinks write to the files opened made (importer.Plan writes nothing
// before it opened the source).
func (p *planOutputs) ambiguousSink() io.Writer {
	return writerFunc(func(b []byte) (int, error) { return p.amb.Write(b) })
}
func (p *planOutputs) invalidSink() io.Writer {
	return writerFunc(func(b []byte) (int, error) { return p.invalid.Write(b) })
}

func (p *planOutputs) close() {
	for _, f := range []*os.File{p.amb, p.inv} {
		if f != nil {
			f.Close()
		}
	}
}

// remove closes and deletes the files the plan made, when it stored no
// plan: a rerun after the fix does not find them in its way.
func (p *planOutputs) remove() {
	p.close()
	for _, f := range []*os.File{p.amb, p.inv} {
		if f != nil {
			_ = os.Remove(f.Name())
		}
	}
	p.amb, p.inv = nil, nil
}

type writerFunc func([]byte) (int, error)

func (w writerFunc) Write(b []byte) (int, error) { return w(b) }

// opener opens the plan's source where importer.Plan says (after --since,
// less --since-overlap): a file that cannot be read exits 1, a store that
// cannot be reached 5.
func (o *ImportPlanOptions) opener() importer.Opener {
	if o.FromNDJSON != "" {
		return func(ctx context.Context, since *importer.Cursor, ordered bool) (importer.Source, error) {
			src, err := importer.File(o.FromNDJSON)(ctx, since, ordered)
			if err != nil {
				return nil, cmdutil.FileErr("--from-ndjson: %w", err)
			}
			return src, nil
		}
	}
	pg := importer.PostgresSource{DSN: o.FromPostgres, Query: o.Query, PasswordEnv: o.PasswordEnv}.Opener()
	return func(ctx context.Context, since *importer.Cursor, ordered bool) (importer.Source, error) {
		src, err := pg(ctx, since, ordered)
		if errors.Is(err, db.ErrConnect) {
			// unreachable, or its login refused: as an unreachable database
			return nil, cmdutil.WithCode(cmdutil.ExitFailure, fmt.Errorf("source: %w", err))
		}
		if err != nil {
			return nil, cmdutil.WithCode(cmdutil.ExitInvalid, fmt.Errorf("source: %w", err))
		}
		return src, nil
	}
}

// showImportPlan prints an import plan without reading its items (an
// import may hold millions): its source, digest, counts, money totals,
// cursor and sample.
func showImportPlan(f *cmdutil.Factory, p governance.EntryPlan) error {
	if f.JSON() {
		return cmdutil.PrintJSONLine(f.IO.Out, p)
	}
	return record.PrintEntryReview(f.IO.Out, governance.ReviewImport(p), 0)
}

func printCursorHint(f *cmdutil.Factory, res importer.Result) {
	if res.Cursor == nil {
		return
	}
	fmt.Fprintf(f.IO.ErrOut, "cursor: %s (the next import takes --since %s)\n", res.Cursor, res.Cursor)
	if n := res.AmbiguousBeforeCursor; n > 0 {
		fmt.Fprintf(f.IO.ErrOut, "note: %d ambiguous rows lie before the cursor: a plan with --since %s reads again those stamped within --since-overlap of it "+
			"(%d of them with the default %s; all %d with --since-overlap %s or more); once the old writers stopped, import the others by a query of their keys (docs/import.md)\n",
			n, res.Cursor, res.AmbiguousRereadByDefault, importer.DefaultSinceOverlap, n, res.AmbiguousOverlapForAll)
	}
}

func invalidExit(c importer.Counts) error {
	if c.Invalid > 0 {
		return cmdutil.WithCode(cmdutil.ExitInvalid, fmt.Errorf("%d invalid rows (not in the plan)", c.Invalid))
	}
	return nil
}
