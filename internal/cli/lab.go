package cli

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/lab"
)

// LabOptions are the flags of `idemctl lab`.
type LabOptions struct {
	IO       *IOStreams
	JSON     bool
	Trials   int
	Seed     uint64
	Designs  []string
	Parallel int
	// Worker starts the lab's worker processes; zero means this binary's hidden
	// `idemctl lab worker`. Tests point it at a built idemctl.
	Worker lab.WorkerCommand
	f      *Factory
}

// NewCmdLab builds `idemctl lab` and its hidden `lab worker`.
func NewCmdLab(f *Factory, runF func(*LabOptions) error) *cobra.Command {
	opts := &LabOptions{IO: f.IO, f: f}
	cmd := &cobra.Command{
		Use:   "lab",
		Short: "Crash the broken idempotency designs and the atomic executor, and count the damage",
		Long: `Run four broken ways of doing idempotency, and idemctl's atomic executor, through
one workload with real crashes, and count what each one lost, doubled or
answered wrongly. A teaching tool, and idemctl's own crash-safety test.

  marker_separate_tx        the dedup marker commits in its own transaction,
                            then the effect: a crash in between loses it for ever
  effect_before_marker      the effect commits, then the marker: a crash in
                            between lets the retry apply it twice
  ttl_shorter_than_horizon  the inbox forgets after 24h, the DLQ replays on day 7
                            (simulated time): applied twice
  nonatomic_payload_check   the payload is checked before the insert: under a
                            concurrent duplicate, a caller gets another command's result
  atomic                    the Core executor (idem.execute, idem.claim/complete):
                            inbox row, effect and saved response in one transaction

Every trial starts a worker process (this binary) whose first attempt is
killed with SIGKILL at a chosen point: before the call, after the marker,
inside the effect (the server rolls it back), after the effect, before COMMIT,
after COMMIT but before the reply is read, before the caller is told. The
database is then reopened on new connections and everything is replayed as a
recovering system would: the retries whose reply never came, duplicates,
concurrent duplicates, conflicting retries and late replays from the DLQ.

Columns: operations (requests delivered), lost and doubled (operations that
ended with no posting, or more than one), wrong_response (a success reply
carrying another command's result), missed_conflicts (a request with another
payload that was not answered "conflict"), trials (crash trials). -o json adds
the kill timings per step and a few examples per anomaly.

The lab works only in scratch schemas idemlab_<run>_<design> that it creates
and drops, also when interrupted; leftovers of a killed run are dropped by the
next one. It never touches schema idem or any other data; it needs the right
to CREATE schemas. Runs are reproducible with --seed, except for the timing of
the kills.

Exit 0 when the lab ran, whatever the broken designs showed; exit 1 if the
atomic executor showed any anomaly (a bug: keep the output and report it).`,
		Example: `  # the CI-sized run, as a table
  idemctl lab --trials 100 --seed 1

  # the long run, machine-readable, on a scratch database
  createdb -h 127.0.0.1 -U postgres idemctl_lab
  IDEMCTL_DSN=postgres://postgres@127.0.0.1:5432/idemctl_lab idemctl lab --trials 1000 --seed 1 -o json

  # only two designs, side by side
  idemctl lab --designs marker_separate_tx,atomic`,
		Args: maxArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Trials < 1 || opts.Trials > lab.MaxTrials {
				return usageErr("--trials must be between 1 and %d", lab.MaxTrials)
			}
			if opts.Parallel < 1 || opts.Parallel > lab.MaxParallel {
				return usageErr("--parallel must be between 1 and %d", lab.MaxParallel)
			}
			known := map[string]bool{}
			for _, n := range lab.DesignNames() {
				known[n] = true
			}
			var designs []string
			for _, d := range opts.Designs {
				d = strings.TrimSpace(d)
				if d == "" {
					continue
				}
				if !known[d] {
					return usageErr("unknown design %q: use %s", d, strings.Join(lab.DesignNames(), ", "))
				}
				designs = append(designs, d)
			}
			if len(designs) == 0 {
				return usageErr("--designs selects nothing: use %s", strings.Join(lab.DesignNames(), ", "))
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
	cmd.Flags().StringSliceVar(&opts.Designs, "designs", lab.DesignNames(), "designs to run, comma-separated")
	cmd.Flags().IntVar(&opts.Parallel, "parallel", lab.DefaultParallel, "trials in flight at once (worker processes)")
	cmd.AddCommand(newCmdLabWorker(f))
	return cmd
}

// newCmdLabWorker is the worker process the lab starts and kills. Hidden: it
// speaks a line protocol with its parent on stdin and stdout.
func newCmdLabWorker(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:    "worker",
		Short:  "One crash-trial worker of idemctl lab (internal)",
		Hidden: true,
		Args:   maxArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			return lab.Worker(cmd.Context(), f.IO.In, f.IO.Out)
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
	fmt.Fprintf(opts.IO.ErrOut, "lab: seed %d, %d trials per design, on %s (rerun with --seed %d)\n",
		opts.Seed, opts.Trials, opts.f.describeDB(), opts.Seed)
	rep, err := lab.Run(ctx, lab.Options{
		DSN:      opts.f.DSN(),
		Trials:   opts.Trials,
		Seed:     opts.Seed,
		Designs:  opts.Designs,
		Parallel: opts.Parallel,
		Worker:   opts.Worker,
		Progress: opts.IO.ErrOut,
	})
	if err != nil {
		return err
	}
	if opts.JSON {
		for _, d := range rep.Designs {
			if err := printJSONLine(opts.IO.Out, d); err != nil {
				return err
			}
		}
	} else if err := printLabTable(opts, rep); err != nil {
		return err
	}
	for _, d := range rep.Designs {
		if d.Expected != "" && d.Count(d.Expected) == 0 {
			fmt.Fprintf(opts.IO.ErrOut, "lab: warning: %s showed no %s in %d trials; run more trials (the lab is not doing its job otherwise)\n",
				d.Design, d.Expected, d.Trials)
		}
	}
	return labVerdict(rep)
}

// labVerdict fails the run when the atomic executor showed any anomaly: the
// broken designs are expected to, the executor must never.
func labVerdict(rep *lab.Report) error {
	for _, d := range rep.Designs {
		if d.Design == "atomic" && d.Anomalies() > 0 {
			return withCode(ExitFailure, fmt.Errorf(
				"BUG: the atomic executor showed anomalies (lost %d, doubled %d, wrong_response %d, missed_conflicts %d) with seed %d; keep this output and report it",
				d.Lost, d.Doubled, d.WrongResponse, d.MissedConflicts, rep.Seed))
		}
	}
	return nil
}

func printLabTable(opts *LabOptions, rep *lab.Report) error {
	header := []string{"design", "operations", "lost", "doubled", "wrong_response", "missed_conflicts", "trials"}
	rows := make([][]string, 0, len(rep.Designs))
	for _, d := range rep.Designs {
		rows = append(rows, []string{d.Design, strconv.Itoa(d.Operations), strconv.Itoa(d.Lost), strconv.Itoa(d.Doubled),
			strconv.Itoa(d.WrongResponse), strconv.Itoa(d.MissedConflicts), strconv.Itoa(d.Trials)})
	}
	w := opts.IO.Out
	fmt.Fprintf(w, "idemctl lab: seed %d, %d crash trials per design, run %s\n", rep.Seed, rep.Trials, rep.RunID)
	if err := printTable(w, header, rows); err != nil {
		return err
	}
	for _, d := range rep.Designs {
		verdict := "no anomaly"
		if d.Expected != "" {
			verdict = fmt.Sprintf("%s %d", d.Expected, d.Count(d.Expected))
		} else if n := d.Anomalies(); n > 0 {
			verdict = fmt.Sprintf("%d ANOMALIES", n)
		}
		fmt.Fprintf(w, "  %-25s %-18s %s\n", d.Design, verdict, d.Summary)
	}
	fmt.Fprintln(w, "Kill points and timings per design, and examples of each anomaly: -o json.")
	return nil
}
