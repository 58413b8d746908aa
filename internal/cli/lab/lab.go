// Package lab holds `idemctl lab`: the broken designs next to the atomic one
// under crashes and races, with the anomalies each shows.
package lab

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/db"
	"github.com/idemctl/idemctl/lab"
)

// LabOptions are the flags of `idemctl lab`.
type LabOptions struct {
	IO       *cmdutil.IOStreams
	JSON     bool
	Trials   int
	Seed     uint64
	Designs  []string
	Parallel int
	// Explain names a design to explain instead of running the lab.
	Explain string
	// RedisServer is the redis-server binary redis_inbox starts.
	RedisServer string
	// Worker starts the lab's worker processes; zero means this binary's hidden
	// `idemctl lab worker`. Tests point it at a built idemctl.
	Worker lab.WorkerCommand
	f      *cmdutil.Factory
}

// NewCmdLab builds `idemctl lab` and its hidden `lab worker`.
func NewCmdLab(f *cmdutil.Factory, runF func(*LabOptions) error) *cobra.Command {
	opts := &LabOptions{IO: f.IO, f: f}
	cmd := &cobra.Command{
		Use:   "lab",
		Short: "Crash the broken idempotency designs and the atomic executor, and count the damage",
		Long:  labLong(),
		Example: `  # the CI-sized run, as a table
  idemctl lab --trials 30 --seed 1

  # the long run, machine-readable, on a scratch database
  createdb -h 127.0.0.1 -U postgres idemctl_lab
  IDEMCTL_DSN=postgres://postgres@127.0.0.1:5432/idemctl_lab idemctl lab --trials 1000 --seed 1 -o json

  # only two designs, side by side
  idemctl lab --designs marker_separate_tx,atomic

  # show a colleague where a design breaks: its SQL (or Redis commands) and the step
  idemctl lab --explain redis_inbox`,
		Args: cmdutil.MaxArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Explain != "" {
				if !knownDesign(opts.Explain) {
					return cmdutil.UsageErr("unknown design %q: use %s", opts.Explain, strings.Join(lab.DesignNames(), ", "))
				}
				if runF != nil {
					return runF(opts)
				}
				return lab.Explain(opts.IO.Out, opts.Explain)
			}
			if opts.Trials < 1 || opts.Trials > lab.MaxTrials {
				return cmdutil.UsageErr("--trials must be between 1 and %d", lab.MaxTrials)
			}
			if opts.Parallel < 1 || opts.Parallel > lab.MaxParallel {
				return cmdutil.UsageErr("--parallel must be between 1 and %d", lab.MaxParallel)
			}
			if !cmd.Flags().Changed("designs") {
				opts.Designs = lab.DesignNames()
			}
			var designs []string
			for _, d := range opts.Designs {
				d = strings.TrimSpace(d)
				if d == "" {
					continue
				}
				if !knownDesign(d) {
					return cmdutil.UsageErr("unknown design %q: use %s", d, strings.Join(lab.DesignNames(), ", "))
				}
				designs = append(designs, d)
			}
			if len(designs) == 0 {
				return cmdutil.UsageErr("--designs selects nothing: use %s", strings.Join(lab.DesignNames(), ", "))
			}
			opts.Designs = designs
			if !cmd.Flags().Changed("seed") {
				opts.Seed = randomSeed()
			}
			opts.JSON = f.JSON()
			if runF != nil {
				return runF(opts)
			}
			return labRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().IntVar(&opts.Trials, "trials", lab.DefaultTrials, "crash trials per design")
	cmd.Flags().Uint64Var(&opts.Seed, "seed", 0, "workload seed (default: a random one, printed on stderr)")
	// No default shown: every design's name would make one unbreakable line.
	cmd.Flags().StringSliceVar(&opts.Designs, "designs", nil, "designs to run, comma-separated (default: every design, in the order above)")
	cmd.Flags().IntVar(&opts.Parallel, "parallel", lab.DefaultParallel, "trials in flight at once (worker processes)")
	cmd.Flags().StringVar(&opts.Explain, "explain", "", "print a design's SQL (or Redis commands) and the step where it breaks, and exit")
	cmd.Flags().StringVar(&opts.RedisServer, "redis-server", "", "redis-server binary that redis_inbox starts (default: the one in PATH)")
	cmd.AddCommand(newCmdLabWorker(f))
	return cmd
}

// newCmdLabWorker is the worker process the lab starts and kills. Hidden: it
// speaks a line protocol with its parent on stdin and stdout.
func newCmdLabWorker(f *cmdutil.Factory) *cobra.Command {
	return &cobra.Command{
		Use:    "worker",
		Short:  "One crash-trial worker of idemctl lab (internal)",
		Hidden: true,
		Args:   cmdutil.MaxArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			return lab.Worker(cmd.Context(), f.IO.In, f.IO.RawOut)
		},
	}
}

func randomSeed() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	// Small enough to read out and type back.
	return binary.LittleEndian.Uint64(b[:]) % 1_000_000_000
}

func labRun(ctx context.Context, opts *LabOptions) error {
	if err := db.CheckTarget(opts.f.DSN()); err != nil {
		return cmdutil.WithCode(cmdutil.ExitUsage, err)
	}
	fmt.Fprintf(opts.IO.ErrOut, "lab: seed %d, %d trials per design, on %s (rerun with --seed %d)\n",
		opts.Seed, opts.Trials, opts.f.DescribeDB(), opts.Seed)
	rep, err := lab.Run(ctx, lab.Options{
		DSN:      opts.f.DSN(),
		Trials:   opts.Trials,
		Seed:     opts.Seed,
		Designs:  opts.Designs,
		Parallel: opts.Parallel,
		Worker:   opts.Worker,
		Progress: opts.IO.ErrOut,

		RedisServer: opts.RedisServer,
	})
	if err != nil {
		return err
	}
	if opts.JSON {
		for _, d := range rep.Designs {
			if err := cmdutil.PrintJSONLine(opts.IO.Out, d); err != nil {
				return err
			}
		}
	} else if err := PrintLabTable(opts, rep); err != nil {
		return err
	}
	labWarnings(opts, rep)
	return labVerdict(rep)
}

// labWarnings says when a broken design did not show its damage (too few
// trials), or a rebuilt projection did not come out right.
func labWarnings(opts *LabOptions, rep *lab.Report) {
	for _, d := range rep.Designs {
		for _, col := range d.Expected {
			if d.Count(col) == 0 {
				fmt.Fprintf(opts.IO.ErrOut, "lab: warning: %s showed no %s in %d trials; run more trials (the lab is not doing its job otherwise)\n",
					d.Design, col, d.Trials)
			}
		}
		if d.DoubledBeforeRebuild != nil && d.Anomalies() > 0 {
			fmt.Fprintf(opts.IO.ErrOut, "lab: warning: %s still shows %d anomalies after its rebuild\n", d.Design, d.Anomalies())
		}
	}
}

// labVerdict fails the run when the atomic executor showed any anomaly: the
// broken designs are expected to, the executor must never.
func labVerdict(rep *lab.Report) error {
	for _, d := range rep.Designs {
		if d.Design == "atomic" && d.Anomalies() > 0 {
			return cmdutil.WithCode(cmdutil.ExitFailure, fmt.Errorf(
				"BUG: the atomic executor showed anomalies (lost %d, doubled %d, wrong_response %d, missed_conflicts %d, false_conflicts %d, lost_revisions %d) with seed %d; keep this output and report it",
				d.Lost, d.Doubled, d.WrongResponse, d.MissedConflicts, d.FalseConflicts, d.LostRevisions, rep.Seed))
		}
	}
	return nil
}

// PrintLabTable prints the lab report as a table, one row per design with
// its anomaly counts, then each design's verdict.
func PrintLabTable(opts *LabOptions, rep *lab.Report) error {
	header := append(append([]string{"design", "operations"}, lab.AnomalyColumns...), "trials")
	rows := make([][]string, 0, len(rep.Designs))
	for _, d := range rep.Designs {
		row := []string{d.Design, strconv.Itoa(d.Operations)}
		for _, col := range lab.AnomalyColumns {
			row = append(row, strconv.Itoa(d.Count(col)))
		}
		rows = append(rows, append(row, strconv.Itoa(d.Trials)))
	}
	w := opts.IO.Out
	fmt.Fprintf(w, "idemctl lab: seed %d, %d crash trials per design, run %s\n", rep.Seed, rep.Trials, rep.RunID)
	if err := cmdutil.PrintTable(w, header, rows); err != nil {
		return err
	}
	width := 0
	for _, d := range rep.Designs {
		width = max(width, len(labVerdictWord(d)))
	}
	for _, d := range rep.Designs {
		fmt.Fprintf(w, "  %-25s %-*s  %s; %s\n", d.Design, width, labVerdictWord(d), d.Does, d.Summary)
	}
	fmt.Fprintln(w, "Kill points and timings per design, and examples of each anomaly: -o json. Where a design breaks: --explain DESIGN.")
	return nil
}

// labVerdictWord is a design's damage in a few words: its expected columns,
// or its anomalies when it should have none.
func labVerdictWord(d lab.DesignReport) string {
	var parts []string
	for _, col := range d.Expected {
		parts = append(parts, fmt.Sprintf("%s %d", col, d.Count(col)))
	}
	switch {
	case len(parts) > 0:
		return strings.Join(parts, ", ")
	case d.Anomalies() > 0:
		return fmt.Sprintf("%d ANOMALIES", d.Anomalies())
	case d.DoubledBeforeRebuild != nil:
		return fmt.Sprintf("0 (was doubled %d)", *d.DoubledBeforeRebuild)
	}
	return "no anomaly"
}

func knownDesign(name string) bool {
	for _, n := range lab.DesignNames() {
		if n == name {
			return true
		}
	}
	return false
}

// labLong is the help text of `idemctl lab`, with the designs listed from the lab itself.
func labLong() string {
	var b strings.Builder
	b.WriteString(`Run the broken ways of doing idempotency, and idemctl's atomic executor,
through one workload with real crashes, and count what each one lost, doubled
or answered wrongly. A teaching tool, and idemctl's own crash-safety test.

`)
	for _, d := range lab.Designs() {
		fmt.Fprintf(&b, "  %-24s %s\n  %-24s -> %s\n", d.Name, d.Does, "", d.Summary)
	}
	b.WriteString(labLongRest)
	return b.String()
}

const labLongRest = `
Every trial starts a worker process (this binary) whose first attempt is
killed with SIGKILL at a chosen point: before the call, after the marker,
inside the effect (the server rolls it back), after the effect, before COMMIT,
after COMMIT but before the reply is read, before the caller is told. The
database is then reopened on new connections and everything is replayed as a
recovering system would: the retries whose reply never came (racing
concurrent duplicates; some time out and are retried again), duplicates,
conflicting retries, the same command re-sent with its keys reordered or
published again at a new offset, another tenant's command with the same
operation id, settlement revisions, and late replays from the DLQ.
redis_inbox runs a redis-server of its own (own data directory and socket,
never a shared server), and kills and restarts it after the recovery retries.

Columns: operations (requests delivered), lost and doubled (operations that
ended with no posting, or more than one), wrong_response (a success reply
carrying another command's result), missed_conflicts (a request with another
payload that was not answered "conflict"), false_conflicts (a request with the
very payload that was refused as "conflict"), lost_revisions (settlement
revisions never posted), trials (crash trials). -o json adds the kill timings
per step and a few examples per anomaly. --explain DESIGN prints a design's
SQL (or Redis commands) and the step where it breaks.

The lab works only in scratch schemas idemlab_<run>_<design> that it creates
and drops, also when interrupted; leftovers of a killed run are dropped by the
next one. It never touches schema idem or any other data; it needs the right
to CREATE schemas. Runs are reproducible with --seed, except for the timing of
the kills.

Exit 0 when the lab ran, whatever the broken designs showed; exit 1 if the
atomic executor showed any anomaly (a bug: keep the output and report it).`
