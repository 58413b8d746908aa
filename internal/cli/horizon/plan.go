package horizon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/audit"
	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
)

// HorizonCheckOptions are the flags of `idemctl horizon check`.
type HorizonCheckOptions struct {
	IO     *cmdutil.IOStreams
	JSON   bool
	Class  string
	Before string
	Margin time.Duration
	f      *cmdutil.Factory
}

// NewCmdHorizonCheck builds `idemctl horizon check`.
func NewCmdHorizonCheck(f *cmdutil.Factory, runF func(*HorizonCheckOptions) error) *cobra.Command {
	opts := &HorizonCheckOptions{IO: f.IO, f: f}
	cmd := &cobra.Command{
		Use:   "check --class C [--before T]",
		Short: "Probe every source and print the evidence and the safe cutoff",
		Long: `Probe every replay source at once, each under its timeout, and print per source:
kind, mode (bounding or enumerating), the oldest replayable time, how many
identities it pins inside the purge range, the probe's duration and its
verdict (closed, open: it can replay before the cutoff, failed: not proven).
Then the safe cutoff: the oldest bound minus the margin (clock skew), never
later than the class's min-age allows, on the primary's clock.

Without --before, sources are judged against the safe cutoff. Nothing is
recorded. Exit code 5 when the horizon is not proven for the cutoff.`,
		Example: `  idemctl horizon check --class reporting.daily_totals
  idemctl horizon check --class reporting.daily_totals --before 30d --margin 10m -o json`,
		Args: cmdutil.MaxArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Class == "" {
				return cmdutil.UsageErr("--class is required")
			}
			if opts.Margin <= 0 {
				return cmdutil.UsageErr("--margin must be positive")
			}
			opts.JSON = f.JSON()
			if runF != nil {
				return runF(opts)
			}
			return horizonCheckRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Class, "class", "", "operation class")
	cmd.Flags().StringVar(&opts.Before, "before", "", "cutoff to judge: RFC 3339 time or duration ago (30d)")
	cmd.Flags().DurationVar(&opts.Margin, "margin", horizon.DefaultMargin, "safety margin for clock skew between sources and the primary")
	return cmd
}

func horizonCheckRun(ctx context.Context, opts *HorizonCheckOptions) error {
	pool, err := opts.f.Pool(ctx)
	if err != nil {
		return err
	}
	co := horizon.CheckOptions{Class: opts.Class, Margin: opts.Margin}
	if opts.Before != "" {
		t, err := horizon.ResolveBefore(ctx, pool, opts.Before)
		if err != nil {
			return cmdutil.WithCode(cmdutil.ExitUsage, err)
		}
		co.Before = &t
	}
	rep, err := horizon.Check(ctx, pool, co)
	if err != nil {
		return horizonErr(err)
	}
	if opts.JSON {
		if err := cmdutil.PrintJSONLine(opts.IO.Out, rep); err != nil {
			return err
		}
	} else {
		if err := printEvidence(opts.IO, rep.Evidence, nil); err != nil {
			return err
		}
		failed := slices.ContainsFunc(rep.Evidence, func(ev horizon.Evidence) bool { return ev.Verdict == horizon.VerdictFailed })
		switch {
		case rep.Unbounded: // said below
		case failed || !rep.Proven && rep.Before == nil:
			// A source that failed has no bound: no cutoff is safe yet.
			fmt.Fprintln(opts.IO.Out, "safe cutoff: NOT proven (a source failed or is open: its verdict above says why; fix it and check again)")
		default:
			fmt.Fprintf(opts.IO.Out, "safe cutoff: %s (oldest bound minus margin %s; primary clock %s)\n",
				cmdutil.FormatStamp(rep.SafeCutoff), opts.Margin, cmdutil.FormatStamp(rep.Now))
		}
		if rep.Before != nil {
			verdict := "proven"
			if !rep.Proven {
				verdict = "NOT proven"
			}
			fmt.Fprintf(opts.IO.Out, "cutoff %s: %s\n", cmdutil.FormatStamp(*rep.Before), verdict)
		}
		if rep.Unbounded {
			fmt.Fprintln(opts.IO.Out, "NOT proven: no source but the manual one; add the topics, dead-letter queues and archives that can replay the class (idemctl horizon source add)")
		}
	}
	if !rep.Proven {
		return cmdutil.SilentExit{Code: cmdutil.ExitInvalid}
	}
	return nil
}

// printEvidence renders the probes' evidence as a table. With a plan's pins
// (held, by holder: nil for a check) its pins column is what the plan pins on
// each source's account, adding up to the plan's total with a row for
// quarantine, and "(N listed)" when the source listed more (identities
// another source holds).
func printEvidence(io *cmdutil.IOStreams, evidence []horizon.Evidence, held []horizon.PinHolder) error {
	rows := make([][]string, 0, len(evidence)+1)
	byHolder := map[string]int64{}
	for _, h := range held {
		byHolder[h.HeldBy] = h.Identities
	}
	shown := map[string]bool{}
	for _, ev := range evidence {
		oldest := "-"
		if ev.Oldest != nil {
			oldest = cmdutil.FormatStamp(*ev.Oldest)
		}
		mode := string(ev.Mode)
		if mode == "" {
			mode = "-"
		}
		pins := cmdutil.HumanCount(ev.Pinned)
		if held != nil {
			pins = cmdutil.HumanCount(byHolder[ev.Source])
			if ev.Pinned != byHolder[ev.Source] {
				pins += fmt.Sprintf(" (%s listed)", cmdutil.HumanCount(ev.Pinned))
			}
		}
		shown[ev.Source] = true
		rows = append(rows, []string{ev.Source, string(ev.Kind), mode, oldest, pins,
			fmt.Sprintf("%.0fms", ev.DurationMS), string(ev.Verdict), ev.Reason})
	}
	for _, h := range held {
		if shown[h.HeldBy] {
			continue
		}
		reason := "held by open or rejected quarantine records"
		if h.HeldBy != "quarantine" {
			reason = "a source the proof does not list"
		}
		rows = append(rows, []string{h.HeldBy, "-", "-", "-", cmdutil.HumanCount(h.Identities), "-", "-", reason})
	}
	return cmdutil.PrintTable(io.Out, []string{"source", "kind", "mode", "oldest replayable", "pins", "probe", "verdict", "reason"}, rows)
}

// HorizonPlanOptions are the flags of `idemctl horizon plan`.
type HorizonPlanOptions struct {
	IO             *cmdutil.IOStreams
	JSON           bool
	Class          string
	Before         string
	Contract       string
	Margin         time.Duration
	DropTombstones bool
	// AcceptUnbounded is --accept-unbounded-horizon.
	AcceptUnbounded bool
	// ExpiresIn is --expires-in.
	ExpiresIn time.Duration
	Operator  string
	f         *cmdutil.Factory
}

// NewCmdHorizonPlan builds `idemctl horizon plan`.
func NewCmdHorizonPlan(f *cmdutil.Factory, runF func(*HorizonPlanOptions) error) *cobra.Command {
	opts := &HorizonPlanOptions{IO: f.IO, f: f}
	cmd := &cobra.Command{
		Use:   "plan --class C --before T [--contract REF]",
		Short: "Probe every source and record the proof and a purge plan",
		Long: `Probe every source and record the proof (every source's evidence) and a plan:
the cutoff (--before, or earlier when the class's min-age requires it), how
many rows it covers and which identities it pins (enumerated by a source, or
with an open or rejected quarantine record). The plan then waits for another
operator's approval.

Refused, with nothing recorded, when any source fails, times out, returns
nonsense or can replay before the cutoff plus the margin; when the class is
forever and no --contract is given; when a purge of the class is in progress;
and when no source but the built-in manual one (pending corrections) was
probed: nothing then bounds what live topics, dead-letter queues and
archives could replay. Add them (idemctl horizon source add), or, when
nothing else can replay the class, say so with --accept-unbounded-horizon.
A cutoff inside the safety margin is always refused.

A plan expires (--expires-in, default 7d, from 1m to 30d): past it, its
proof is stale and the database refuses to approve it or to start its purge
(a purge already running resumes); cancel it and plan again.

--drop-tombstones plans the removal of the class's tombstones themselves (a
second proof; horizon classes only, never forever ones).

-o json prints the plan with its id.`,
		Example: `  idemctl horizon plan --class reporting.daily_totals --before 30d
  idemctl horizon plan --class payments.charge --before 2025-01-01T00:00:00Z --contract LEGAL-2026-17 -o json | jq .id
  idemctl horizon plan --class reporting.daily_totals --before 400d --drop-tombstones`,
		Args: cmdutil.MaxArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Class == "" || opts.Before == "" {
				return cmdutil.UsageErr("--class and --before are required")
			}
			if opts.Margin <= 0 {
				return cmdutil.UsageErr("--margin must be positive")
			}
			if opts.ExpiresIn < time.Minute || opts.ExpiresIn > 30*24*time.Hour {
				return cmdutil.UsageErr("--expires-in must be between 1m and 720h (30 days), got %s", opts.ExpiresIn)
			}
			opts.Operator = f.Operator()
			opts.JSON = f.JSON()
			if runF != nil {
				return runF(opts)
			}
			return horizonPlanRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Class, "class", "", "operation class")
	cmd.Flags().StringVar(&opts.Before, "before", "", "purge identities created before: RFC 3339 time or duration ago (30d)")
	cmd.Flags().StringVar(&opts.Contract, "contract", "", "business contract reference (required for forever classes; recorded)")
	cmd.Flags().DurationVar(&opts.Margin, "margin", horizon.DefaultMargin, "safety margin for clock skew between sources and the primary")
	cmd.Flags().BoolVar(&opts.DropTombstones, "drop-tombstones", false, "plan the removal of tombstones (horizon classes only)")
	cmd.Flags().BoolVar(&opts.AcceptUnbounded, "accept-unbounded-horizon", false, "allow a plan with no source but the manual one (nothing else can replay the class)")
	cmd.Flags().DurationVar(&opts.ExpiresIn, "expires-in", horizon.DefaultPlanExpiry, "the plan can be approved and started for this long (1m to 720h)")
	return cmd
}

func horizonPlanRun(ctx context.Context, opts *HorizonPlanOptions) error {
	pool, err := opts.f.Pool(ctx)
	if err != nil {
		return err
	}
	before, err := horizon.ResolveBefore(ctx, pool, opts.Before)
	if err != nil {
		return cmdutil.WithCode(cmdutil.ExitUsage, err)
	}
	p, err := horizon.MakePlan(ctx, pool, horizon.PlanOptions{Class: opts.Class, Before: before, Contract: opts.Contract,
		Margin: opts.Margin, DropTombstones: opts.DropTombstones, Operator: opts.Operator, AcceptUnbounded: opts.AcceptUnbounded, ExpiresIn: opts.ExpiresIn})
	var pe *horizon.ProofError
	if errors.As(err, &pe) && !opts.JSON {
		_ = printEvidence(&cmdutil.IOStreams{Out: opts.IO.ErrOut}, pe.Evidence, nil)
	}
	if err != nil {
		return horizonErr(err)
	}
	if opts.JSON {
		return cmdutil.PrintJSONLine(opts.IO.Out, p)
	}
	if err := printPlan(opts.IO, p); err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.ErrOut, "plan %d recorded; another operator approves it: idemctl horizon approve %d\n", p.ID, p.ID)
	return nil
}

// pinnedLine is the plan's pins and what holds them, adding up to the total:
// "5 identities (held by quarantine: 4, dlq: 1)". The proof's table counts, per source, every
// identity that source listed (one listed by two sources shows in both), and
// quarantine holds none of its rows.
func pinnedLine(p horizon.Plan) string {
	if p.Pinned == 0 && len(p.PinnedBy) == 0 {
		return "0"
	}
	parts := make([]string, len(p.PinnedBy))
	for i, h := range p.PinnedBy {
		parts[i] = h.HeldBy + ": " + cmdutil.HumanCount(h.Identities)
	}
	noun := map[bool]string{true: " identity", false: " identities"}[p.Pinned == 1]
	line := cmdutil.HumanCount(p.Pinned) + noun + " (held by " + strings.Join(parts, ", ") + ")"
	if p.PinnedWithoutBody > 0 {
		// candidates counts bodies: say how many of the pins keep one
		line += fmt.Sprintf("; %s of them with a body it keeps, %s a tombstone only (no body left)",
			cmdutil.HumanCount(p.Pinned-p.PinnedWithoutBody), cmdutil.HumanCount(p.PinnedWithoutBody))
	}
	return line
}

// candidatesLine says what a plan's candidates are: bodies for a purge,
// tombstones for drop_tombstones.
func candidatesLine(p horizon.Plan) string {
	if p.Action == "purge" {
		return cmdutil.HumanCount(p.Candidates) + " bodies it removes (not pinned, not held by quarantine evidence)"
	}
	return cmdutil.HumanCount(p.Candidates) + " tombstones it drops (not pinned, not held)"
}

// printPlan renders one plan and its proof.
func printPlan(io *cmdutil.IOStreams, p horizon.Plan) error {
	rows := [][]string{
		{"plan", strconv.FormatInt(p.ID, 10)},
		{"class", fmt.Sprintf("%s (%s)", p.Class, p.Retention)},
		{"action", p.Action},
		{"state", string(p.State)},
		{"cutoff", cmdutil.FormatStamp(p.Cutoff)},
		{"candidates", candidatesLine(p)},
		{"pinned", pinnedLine(p)},
		{"purged", cmdutil.HumanCount(p.Purged)},
		{"planned", audit.Who(p.PlannedPerson, p.PlannedDBUser) + " at " + cmdutil.FormatStamp(p.PlannedAt)},
		{"contract", cmdutil.OrDash(p.Contract)},
	}
	if p.ExpiresAt != nil {
		rows = append(rows, []string{"expires", cmdutil.FormatStamp(*p.ExpiresAt) + " (approve and start the purge before)"})
	}
	if p.ApprovedAt != nil {
		rows = append(rows, []string{"approved", audit.Who(p.ApprovedPerson, p.ApprovedDBUser) + " at " + cmdutil.FormatStamp(*p.ApprovedAt)})
	}
	if p.RanPerson != "" || p.RanDBUser != "" {
		rows = append(rows, []string{"ran", audit.Who(p.RanPerson, p.RanDBUser)})
	}
	if p.AbortReason != "" {
		rows = append(rows, []string{"aborted", p.AbortReason})
	}
	removed := "none since the class's last purge"
	if len(p.RemovedSources) > 0 {
		var names []string
		for _, c := range p.RemovedSources {
			names = append(names, fmt.Sprintf("%s (change %d, planned by %s, approved by %s)", c.Target, c.ID,
				audit.Who(c.PlannedPerson, c.PlannedDBUser), audit.Who(cmdutil.Deref(c.ApprovedPerson), cmdutil.Deref(c.ApprovedDBUser))))
		}
		removed = strings.Join(names, "; ")
	}
	rows = append(rows, []string{"sources removed", removed})
	if err := cmdutil.PrintTable(io.Out, []string{"field", "value"}, rows); err != nil {
		return err
	}
	if len(p.Proof) == 0 && len(p.PinnedBy) == 0 {
		return nil
	}
	held := p.PinnedBy
	if held == nil {
		held = []horizon.PinHolder{}
	}
	return printEvidence(io, p.Proof, held)
}
