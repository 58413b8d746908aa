package horizon

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/audit"
	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
)

// NewCmdHorizon builds `idemctl horizon` and its subcommands.
func NewCmdHorizon(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "horizon <command>",
		Short: "Purge the inbox only behind a proven replay horizon (sources, check, plan, approve, purge, status)",
		Long: `An inbox that is never cleaned grows without bound; one cleaned by age alone
charges twice when a DLQ, an archive or a manual correction replays an
operation whose identity was deleted. idemctl purges only what a recorded proof
covers:

  1. sources   every place that could still replay: postgres (outbox/DLQ
               tables), archive (NDJSON files), nats and kafka DLQs, and the
               built-in manual source (idemctl corrections). Each proves closure
               by bounding (its oldest message is newer than the cutoff plus a
               margin) or by enumerating (the identities it lists are pinned,
               never purged). A probe that fails, times out or returns nonsense
               proves nothing (fail closed).
  2. check     probe every source, print the evidence and the safe cutoff.
  3. plan      record the proof and the plan (cutoff, candidates, pins).
  4. approve   by another operator (four-eyes).
  5. purge     re-probe; abort with nothing deleted if anything changed; else
               remove the set in bounded transactions, resumable.

A purged identity leaves a tombstone (tenant, operation, payload hash, class,
plan, time; no payload, no response): a late replay of it is answered "purged"
(same payload) or quarantined as a conflict, and never runs again.

Times come from the primary's clock. --before takes an RFC 3339 time or a
duration ago (30d, 12h).`,
		Example: `  idemctl horizon source add payments-dlq --kind postgres --source-dsn "$DLQ_DSN" \
      --query "SELECT min(failed_at) FROM dlq.payments"
  idemctl horizon check --class reporting.daily_totals --before 30d
  idemctl horizon plan --class reporting.daily_totals --before 30d -o json
  idemctl horizon approve 12 --operator bob
  idemctl horizon purge 12 --yes
  idemctl horizon status`,
	}
	cmd.AddCommand(
		NewCmdHorizonSource(f),
		NewCmdHorizonCheck(f, nil),
		NewCmdHorizonPlan(f, nil),
		NewCmdHorizonApprove(f, nil),
		NewCmdHorizonCancel(f),
		NewCmdHorizonPurge(f, nil),
		NewCmdHorizonStatus(f, nil),
		NewCmdHorizonMaintain(f, nil),
	)
	return cmd
}

// horizonErr maps the horizon package's refusals to exit codes.
func horizonErr(err error) error {
	if err == nil {
		return nil
	}
	for _, refusal := range []error{horizon.ErrNotProven, horizon.ErrUnboundedHorizon, horizon.ErrContractRequired, horizon.ErrForeverTombstones,
		horizon.ErrSameOperator, horizon.ErrPlanState, horizon.ErrPlanNotFound, horizon.ErrUnknownClass,
		horizon.ErrInvalidPolicy, horizon.ErrInvalidSource, horizon.ErrSourceExists, horizon.ErrSourceNotFound,
		horizon.ErrNoPerson, horizon.ErrInsideMargin, horizon.ErrPlanExpired, horizon.ErrPurgeRunning, horizon.ErrInvalidOperator,
		horizon.ErrSecretInConfig, horizon.ErrInvalidCorrection, horizon.ErrCorrectionNotFound} {
		if errors.Is(err, refusal) {
			return cmdutil.WithCode(cmdutil.ExitInvalid, err)
		}
	}
	return err
}

// NewCmdHorizonSource builds `idemctl horizon source` (add, list, remove).
func NewCmdHorizonSource(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "source <command>",
		Short: "Manage replay sources (add, list, remove)",
		Long: `Replay sources are every place that could still replay an operation. The manual
source (pending corrections) is built in. Secrets are never stored: a postgres
source names where its password is (--password-env, a libpq service or a
passfile entry). Adding and removing are recorded in the audit log.`,
		Example: `  idemctl horizon source add outbox --kind postgres --source-dsn "$DSN" --query "SELECT min(created_at) FROM app.outbox"
  idemctl horizon source add dlq-ids --kind postgres --source-dsn "$DSN" --query "SELECT tenant_id, operation_id, failed_at FROM app.dlq"
  idemctl horizon source add archive --kind archive --dir /srv/archive/payments
  idemctl horizon source add js-dlq --kind nats --url nats://127.0.0.1:4222 --stream PAYMENTS_DLQ --mode enumerating
  idemctl horizon source add kafka-dlq --kind kafka --brokers k1:9092,k2:9092 --topic payments.dlq
  idemctl horizon source list
  idemctl horizon source remove archive`,
	}
	cmd.AddCommand(NewCmdHorizonSourceAdd(f, nil), NewCmdHorizonSourceList(f, nil), NewCmdHorizonSourceRemove(f, nil))
	return cmd
}

// HorizonSourceAddOptions are the flags of `idemctl horizon source add`.
type HorizonSourceAddOptions struct {
	IO       *cmdutil.IOStreams
	JSON     bool
	Source   horizon.Source
	Operator string
	f        *cmdutil.Factory
}

// NewCmdHorizonSourceAdd builds `idemctl horizon source add`.
func NewCmdHorizonSourceAdd(f *cmdutil.Factory, runF func(*HorizonSourceAddOptions) error) *cobra.Command {
	opts := &HorizonSourceAddOptions{IO: f.IO, f: f}
	var kind, mode, brokers string
	c := &opts.Source.Config
	cmd := &cobra.Command{
		Use:   "add NAME --kind postgres|archive|nats|kafka ...",
		Short: "Add a replay source",
		Long: `Add a replay source. By kind:

  postgres  --source-dsn (--dsn is idemctl's own database) and --query. The
            query returns either one timestamp (the oldest replayable
            message: bounding; NULL or no row: nothing) or
            rows of (tenant_id, operation_id, ts) (enumerating), with the
            payload as an optional fourth column (text or jsonb; idemctl
            intake reads it). It runs in a read-only transaction. The DSN holds no password: --password-env
            names the variable idemctl reads it from when it probes, or use
            a libpq service (service=NAME) or a passfile entry.
  archive   --dir: NDJSON or NDJSON.gz files of {"tenant","operation_id","ts"}
            (and "payload", for idemctl intake), read streaming; it pins
            what it holds (enumerating).
  nats      --url and --stream (JetStream). --mode bounding (default: the
            stream's first message time) or enumerating (identities from the
            --tenant-header and --op-header of every message).
  kafka     --brokers and --topic. --mode bounding (the earliest offset's
            timestamp; retention.ms is recorded) or enumerating (headers).

--timeout bounds every probe of the source (default 30s).`,
		Example: `  idemctl horizon source add outbox --kind postgres --source-dsn "$DSN" --query "SELECT min(created_at) FROM app.outbox"
  idemctl horizon source add outbox --kind postgres --source-dsn "postgres://reader@db1/app" --password-env IDEMCTL_SOURCE_OUTBOX_PASSWORD --query "SELECT min(created_at) FROM app.outbox"
  idemctl horizon source add js-dlq --kind nats --url nats://127.0.0.1:4222 --stream PAYMENTS_DLQ --mode enumerating`,
		Args: cmdutil.MaxArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return cmdutil.UsageErr("a source name is required")
			}
			opts.Source.Name = args[0]
			opts.Source.Kind = horizon.Kind(kind)
			c.Mode = horizon.Mode(mode)
			if brokers != "" {
				for _, b := range strings.Split(brokers, ",") {
					if b = strings.TrimSpace(b); b != "" {
						c.Brokers = append(c.Brokers, b)
					}
				}
			}
			if err := opts.Source.Validate(); err != nil {
				return cmdutil.WithCode(cmdutil.ExitUsage, err)
			}
			opts.Operator = f.Operator()
			opts.JSON = f.JSON()
			if runF != nil {
				return runF(opts)
			}
			return horizonSourceAddRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&kind, "kind", "", "postgres, archive, nats or kafka")
	fl.StringVar(&c.Query, "query", "", "postgres: SQL returning the oldest timestamp, or (tenant_id, operation_id, ts[, payload]) rows")
	fl.StringVar(&c.Dir, "dir", "", "archive: directory of .ndjson / .ndjson.gz files")
	fl.StringVar(&c.URL, "url", "", "nats: server URL")
	fl.StringVar(&c.Stream, "stream", "", "nats: JetStream stream")
	fl.StringVar(&brokers, "brokers", "", "kafka: seed brokers, comma-separated")
	fl.StringVar(&c.Topic, "topic", "", "kafka: topic")
	fl.StringVar(&mode, "mode", "", "nats, kafka: bounding (default) or enumerating")
	fl.StringVar(&c.TenantHeader, "tenant-header", "", "nats, kafka: header carrying tenant_id (default "+horizon.DefaultTenantHeader+")")
	fl.StringVar(&c.OperationHeader, "op-header", "", "nats, kafka: header carrying operation_id (default "+horizon.DefaultOperationHeader+")")
	fl.DurationVar(&opts.Source.Timeout, "timeout", horizon.DefaultProbeTimeout, "bound on every probe of this source")
	// --dsn is idemctl's own database (a persistent flag); the source's DSN is
	// --source-dsn.
	fl.StringVar(&c.DSN, "source-dsn", "", "postgres: the source database's DSN, without a password (stored)")
	fl.StringVar(&c.PasswordEnv, "password-env", "", "postgres: the environment variable (named IDEMCTL_SOURCE_...) holding the source's password when idemctl probes it (its name is stored, never the password)")
	return cmd
}

func horizonSourceAddRun(ctx context.Context, opts *HorizonSourceAddOptions) error {
	pool, err := opts.f.Pool(ctx)
	if err != nil {
		return err
	}
	if err := horizon.AddSource(ctx, pool, opts.Source, opts.Operator); err != nil {
		return horizonErr(err)
	}
	s := opts.Source.Redacted()
	if opts.JSON {
		return cmdutil.PrintJSONLine(opts.IO.Out, s)
	}
	fmt.Fprintf(opts.IO.Out, "source %s (%s) added: %s\n", s.Name, s.Kind, s.Describe())
	return nil
}

// HorizonSourceListOptions are the flags of `idemctl horizon source list`.
type HorizonSourceListOptions struct {
	IO   *cmdutil.IOStreams
	JSON bool
	f    *cmdutil.Factory
}

// NewCmdHorizonSourceList builds `idemctl horizon source list`.
func NewCmdHorizonSourceList(f *cmdutil.Factory, runF func(*HorizonSourceListOptions) error) *cobra.Command {
	opts := &HorizonSourceListOptions{IO: f.IO, f: f}
	return &cobra.Command{
		Use:     "list",
		Short:   "List replay sources (secrets redacted)",
		Long:    `List every replay source, the built-in manual one first, with where it points. Secrets are redacted. Nothing is probed.`,
		Example: `  idemctl horizon source list`,
		Args:    cmdutil.MaxArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.JSON = f.JSON()
			if runF != nil {
				return runF(opts)
			}
			return horizonSourceListRun(cmd.Context(), opts)
		},
	}
}

func horizonSourceListRun(ctx context.Context, opts *HorizonSourceListOptions) error {
	pool, err := opts.f.Pool(ctx)
	if err != nil {
		return err
	}
	list, err := horizon.ListSources(ctx, pool)
	if err != nil {
		return err
	}
	rows := make([][]string, 0, len(list))
	for _, s := range list {
		s = s.Redacted()
		if opts.JSON {
			if err := cmdutil.PrintJSONLine(opts.IO.Out, s); err != nil {
				return err
			}
			continue
		}
		rows = append(rows, []string{s.Name, string(s.Kind), s.Describe(), s.Timeout.String()})
	}
	if opts.JSON {
		return nil
	}
	return cmdutil.PrintTable(opts.IO.Out, []string{"source", "kind", "where", "timeout"}, rows)
}

// HorizonSourceRemoveOptions are the flags of `idemctl horizon source remove`.
type HorizonSourceRemoveOptions struct {
	IO       *cmdutil.IOStreams
	Name     string
	Operator string
	Reason   string
	f        *cmdutil.Factory
}

// NewCmdHorizonSourceRemove builds `idemctl horizon source remove`.
func NewCmdHorizonSourceRemove(f *cmdutil.Factory, runF func(*HorizonSourceRemoveOptions) error) *cobra.Command {
	opts := &HorizonSourceRemoveOptions{IO: f.IO, f: f}
	cmd := &cobra.Command{
		Use:   "remove NAME --reason TEXT",
		Short: "Plan removing a replay source; another person approves (audited)",
		Long: `Plan removing a replay source. A purge plan made without a source proves the
horizon without it, so removing one needs a second person: this plans a
governed change, and another person's idemctl change approve removes the
source. A purge whose plan's proof includes it then aborts: make a new plan.
Every purge plan shows the sources removed since its class's last purge.
Recorded in the audit log.`,
		Example: `  idemctl horizon source remove old-archive --reason "archive decommissioned (CHG-2211)"
  idemctl change approve 7   # by another person`,
		Args: cmdutil.MaxArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return cmdutil.UsageErr("a source name is required")
			}
			if opts.Reason == "" {
				return cmdutil.UsageErr("--reason is required")
			}
			opts.Name = args[0]
			opts.Operator = f.Operator()
			if runF != nil {
				return runF(opts)
			}
			pool, err := f.Pool(cmd.Context())
			if err != nil {
				return err
			}
			c, err := horizon.RemoveSource(cmd.Context(), pool, opts.Name, opts.Operator, opts.Reason)
			if err != nil {
				return horizonErr(cmdutil.GovernanceErr(err))
			}
			fmt.Fprintf(opts.IO.Out, "removal of source %s planned as change %d: another person approves it with idemctl change approve %d\n",
				opts.Name, c.ID, c.ID)
			return nil
		},
	}
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "why the source no longer replays anything")
	return cmd
}

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
		if err := printEvidence(opts.IO, rep.Evidence); err != nil {
			return err
		}
		fmt.Fprintf(opts.IO.Out, "safe cutoff: %s (oldest bound minus margin %s; primary clock %s)\n",
			cmdutil.FormatStamp(rep.SafeCutoff), opts.Margin, cmdutil.FormatStamp(rep.Now))
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

// printEvidence renders the probes' evidence as a table.
func printEvidence(io *cmdutil.IOStreams, evidence []horizon.Evidence) error {
	rows := make([][]string, 0, len(evidence))
	for _, ev := range evidence {
		oldest := "-"
		if ev.Oldest != nil {
			oldest = cmdutil.FormatStamp(*ev.Oldest)
		}
		mode := string(ev.Mode)
		if mode == "" {
			mode = "-"
		}
		rows = append(rows, []string{ev.Source, string(ev.Kind), mode, oldest, cmdutil.HumanCount(ev.Pinned),
			fmt.Sprintf("%.0fms", ev.DurationMS), string(ev.Verdict), ev.Reason})
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
		_ = printEvidence(&cmdutil.IOStreams{Out: opts.IO.ErrOut}, pe.Evidence)
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

// printPlan renders one plan and its proof.
func printPlan(io *cmdutil.IOStreams, p horizon.Plan) error {
	rows := [][]string{
		{"plan", strconv.FormatInt(p.ID, 10)},
		{"class", fmt.Sprintf("%s (%s)", p.Class, p.Retention)},
		{"action", p.Action},
		{"state", string(p.State)},
		{"cutoff", cmdutil.FormatStamp(p.Cutoff)},
		{"candidates", cmdutil.HumanCount(p.Candidates)},
		{"pinned", cmdutil.HumanCount(p.Pinned)},
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
	if len(p.Proof) == 0 {
		return nil
	}
	return printEvidence(io, p.Proof)
}

// HorizonApproveOptions are the flags of `idemctl horizon approve`.
type HorizonApproveOptions struct {
	IO       *cmdutil.IOStreams
	JSON     bool
	ID       int64
	Operator string
	// Yes skips the confirmation asked on a terminal.
	Yes bool
	f   *cmdutil.Factory
}

// NewCmdHorizonApprove builds `idemctl horizon approve`.
func NewCmdHorizonApprove(f *cmdutil.Factory, runF func(*HorizonApproveOptions) error) *cobra.Command {
	opts := &HorizonApproveOptions{IO: f.IO, f: f}
	cmd := &cobra.Command{
		Use:   "approve PLAN",
		Short: "Approve a plan (four eyes: another person than its planner)",
		Long: `Approve a purge plan. Four eyes compares persons: the database login must map
to a person (idemctl person add) other than the planner's, whatever --operator
says; the planner's person, or a login that maps to no person, is refused with
exit code 5. --operator is recorded as the label. Recorded in the audit log.

On a terminal it first shows the plan, its contract and its proof (every
source's evidence) and asks; without a terminal it needs --yes.`,
		Example: `  idemctl horizon approve 12 --operator bob
  idemctl horizon approve 12 --operator bob --yes -o json`,
		Args: cmdutil.MaxArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parsePlanID(args)
			if err != nil {
				return err
			}
			if err := cmdutil.NeedYes(f.IO, opts.Yes, "approving lets a purge run"); err != nil {
				return err
			}
			opts.ID = id
			opts.Operator = f.Operator()
			opts.JSON = f.JSON()
			if runF != nil {
				return runF(opts)
			}
			pool, err := f.Pool(cmd.Context())
			if err != nil {
				return err
			}
			if !opts.Yes && opts.IO.CanPrompt() {
				p, err := horizon.GetPlan(cmd.Context(), pool, opts.ID)
				if err != nil {
					return horizonErr(err)
				}
				if err := printPlan(opts.IO, p); err != nil {
					return err
				}
				q := fmt.Sprintf("Approve plan %d: purge %s rows of class %s created before %s (contract %s, planned by %s)?",
					p.ID, cmdutil.HumanCount(p.Candidates), p.Class, cmdutil.FormatStamp(p.Cutoff), cmdutil.OrDash(p.Contract), audit.Who(p.PlannedPerson, p.PlannedDBUser))
				if err := cmdutil.Confirm(opts.IO, false, q, "nothing approved"); err != nil {
					return err
				}
			}
			p, err := horizon.Approve(cmd.Context(), pool, opts.ID, opts.Operator)
			if err != nil {
				return horizonErr(err)
			}
			if opts.JSON {
				return cmdutil.PrintJSONLine(opts.IO.Out, p)
			}
			fmt.Fprintf(opts.IO.Out, "plan %d approved by %s (planned by %s); run: idemctl horizon purge %d\n",
				p.ID, audit.Who(p.ApprovedPerson, p.ApprovedDBUser), audit.Who(p.PlannedPerson, p.PlannedDBUser), p.ID)
			return nil
		},
	}
	cmd.Flags().BoolVarP(&opts.Yes, "yes", "y", false, "do not show the plan and ask first")
	return cmd
}

// NewCmdHorizonCancel builds `idemctl horizon cancel`.
func NewCmdHorizonCancel(f *cmdutil.Factory) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "cancel PLAN --reason TEXT",
		Short: "Abort a plan that is planned, approved or purging (a running purge stops at its next batch)",
		Long: `Abort a purge plan: it can no longer be approved or purged. A purge of it that
is running stops at its next transaction (what it removed so far stays
removed, and is recorded). Recorded in the audit log with the reason.`,
		Example: `  idemctl horizon cancel 12 --reason "the DLQ owner found older messages"`,
		Args:    cmdutil.MaxArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parsePlanID(args)
			if err != nil {
				return err
			}
			if strings.TrimSpace(reason) == "" {
				return cmdutil.UsageErr("--reason is required")
			}
			pool, err := f.Pool(cmd.Context())
			if err != nil {
				return err
			}
			p, err := horizon.Cancel(cmd.Context(), pool, id, f.Operator(), reason)
			if err != nil {
				return horizonErr(err)
			}
			if f.JSON() {
				return cmdutil.PrintJSONLine(f.IO.Out, p)
			}
			fmt.Fprintf(f.IO.Out, "plan %d aborted by %s: %s\n", p.ID, p.AbortedBy, p.AbortReason)
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why the plan must not be purged (recorded)")
	return cmd
}

func parsePlanID(args []string) (int64, error) {
	if len(args) != 1 {
		return 0, cmdutil.UsageErr("a plan ID is required (idemctl horizon status shows them)")
	}
	id, err := strconv.ParseInt(strings.TrimPrefix(args[0], "#"), 10, 64)
	if err != nil || id <= 0 {
		return 0, cmdutil.UsageErr("invalid plan ID %q: want a positive number", args[0])
	}
	return id, nil
}

// HorizonPurgeOptions are the flags of `idemctl horizon purge`.
type HorizonPurgeOptions struct {
	IO        *cmdutil.IOStreams
	JSON      bool
	ID        int64
	Yes       bool
	BatchRows int
	Operator  string
	// ProgressInterval is how often a purge without a terminal logs a
	// progress line on stderr (0: never).
	ProgressInterval time.Duration
	f                *cmdutil.Factory
}

// NewCmdHorizonPurge builds `idemctl horizon purge`.
func NewCmdHorizonPurge(f *cmdutil.Factory, runF func(*HorizonPurgeOptions) error) *cobra.Command {
	opts := &HorizonPurgeOptions{IO: f.IO, f: f}
	cmd := &cobra.Command{
		Use:   "purge PLAN [--yes]",
		Short: "Execute an approved plan: re-probe, then purge in bounded transactions",
		Long: `Execute an approved plan. Every source is probed again first: if anything
changed that the plan did not account for (an older bound, a failing or removed
source, new identities pinned inside the purge set), the purge aborts, deletes
nothing, says why, and a new plan is needed (exit code 5).

Otherwise the plan's set goes in bounded transactions (--batch-rows, default
5,000 rows; a day that lies wholly before the cutoff is swapped out in one
short transaction), each leaving tombstones. Progress goes to stderr on a
terminal. Ctrl-C stops between two transactions; run the same command again
to resume. Counts are recorded in the plan and in the audit log.

On a terminal you are asked to confirm; --yes is required when there is none.`,
		Example: `  idemctl horizon purge 12
  idemctl horizon purge 12 --yes -o json`,
		Args: cmdutil.MaxArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parsePlanID(args)
			if err != nil {
				return err
			}
			opts.ID = id
			if opts.BatchRows < 1 || opts.BatchRows > 1_000_000 {
				return cmdutil.UsageErr("--batch-rows must be between 1 and 1000000")
			}
			if !opts.Yes && !f.IO.CanPrompt() {
				return cmdutil.UsageErr("purge deletes inbox rows: pass --yes when there is no terminal to confirm on")
			}
			opts.Operator = f.Operator()
			opts.JSON = f.JSON()
			if runF != nil {
				return runF(opts)
			}
			return horizonPurgeRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVarP(&opts.Yes, "yes", "y", false, "do not ask for confirmation")
	cmd.Flags().IntVar(&opts.BatchRows, "batch-rows", horizon.DefaultBatchRows, "rows per purge transaction")
	cmd.Flags().DurationVar(&opts.ProgressInterval, "progress-interval", cmdutil.DefaultProgressInterval, "without a terminal on stderr, log a progress line this often (0: never)")
	return cmd
}

func horizonPurgeRun(ctx context.Context, opts *HorizonPurgeOptions) error {
	pool, err := opts.f.Pool(ctx)
	if err != nil {
		return err
	}
	p, err := horizon.GetPlan(ctx, pool, opts.ID)
	if err != nil {
		return horizonErr(err)
	}
	if !opts.Yes {
		q := fmt.Sprintf("Purge %s rows of class %s created before %s (plan %d, approved by %s)?",
			cmdutil.HumanCount(p.Candidates-p.Purged), p.Class, cmdutil.FormatStamp(p.Cutoff), p.ID, audit.Who(p.ApprovedPerson, p.ApprovedDBUser))
		if err := cmdutil.Confirm(opts.IO, false, q, "nothing purged"); err != nil {
			return err
		}
	}
	var done atomic.Int64
	done.Store(p.Purged)
	bar := cmdutil.StartProgress(opts.IO, fmt.Sprintf("purge plan %d", p.ID), p.Candidates, done.Load, opts.ProgressInterval)
	res, err := horizon.Purge(ctx, pool, opts.ID, horizon.PurgeOptions{Operator: opts.Operator, BatchRows: opts.BatchRows,
		Progress: func(d, _ int64) { done.Store(d) }})
	bar.Stop()
	if errors.Is(err, horizon.ErrInterrupted) {
		fmt.Fprintf(opts.IO.ErrOut, "interrupted after %s rows (%s of %s in all); resume: idemctl horizon purge %d\n",
			cmdutil.HumanCount(res.Purged), cmdutil.HumanCount(res.Plan.Purged), cmdutil.HumanCount(res.Plan.Candidates), opts.ID)
		return cmdutil.SilentExit{Code: cmdutil.ExitFailure}
	}
	if err != nil {
		return horizonErr(err)
	}
	if opts.JSON {
		if err := cmdutil.PrintJSONLine(opts.IO.Out, res); err != nil {
			return err
		}
	} else if res.Aborted {
		_ = printEvidence(opts.IO, res.Evidence)
	} else {
		fmt.Fprintf(opts.IO.Out, "plan %d done: %s rows purged (%s this run) in %d transactions (%d partitions swapped, %d batches); longest-held locks p99 %s\n",
			res.Plan.ID, cmdutil.HumanCount(res.Plan.Purged), cmdutil.HumanCount(res.Purged), res.Plan.Batches, res.Swaps, res.Batches,
			res.LockHoldP99().Round(time.Millisecond))
	}
	if res.Aborted {
		fmt.Fprintf(opts.IO.ErrOut, "purge aborted, nothing deleted: %s\n", res.AbortReason)
		return cmdutil.SilentExit{Code: cmdutil.ExitInvalid}
	}
	return nil
}

// HorizonStatusOptions are the flags of `idemctl horizon status`.
type HorizonStatusOptions struct {
	IO    *cmdutil.IOStreams
	JSON  bool
	Class string
	ID    int64
	f     *cmdutil.Factory
}

// NewCmdHorizonStatus builds `idemctl horizon status`.
func NewCmdHorizonStatus(f *cmdutil.Factory, runF func(*HorizonStatusOptions) error) *cobra.Command {
	opts := &HorizonStatusOptions{IO: f.IO, f: f}
	cmd := &cobra.Command{
		Use:   "status [PLAN]",
		Short: "List plans and their states (planned, approved, purging, done, aborted)",
		Long: `List purge plans, newest first, with their state, cutoff and counts; with a plan
id, that plan with its proof. Nothing is written.`,
		Example: `  idemctl horizon status
  idemctl horizon status --class reporting.daily_totals -o json
  idemctl horizon status 12`,
		Args: cmdutil.MaxArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				id, err := parsePlanID(args)
				if err != nil {
					return err
				}
				opts.ID = id
			}
			opts.JSON = f.JSON()
			if runF != nil {
				return runF(opts)
			}
			return horizonStatusRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Class, "class", "", "only plans of this class")
	return cmd
}

func horizonStatusRun(ctx context.Context, opts *HorizonStatusOptions) error {
	pool, err := opts.f.Pool(ctx)
	if err != nil {
		return err
	}
	if opts.ID != 0 {
		p, err := horizon.GetPlan(ctx, pool, opts.ID)
		if err != nil {
			return horizonErr(err)
		}
		if opts.JSON {
			return cmdutil.PrintJSONLine(opts.IO.Out, p)
		}
		return printPlan(opts.IO, p)
	}
	plans, err := horizon.ListPlans(ctx, pool, opts.Class, 100)
	if err != nil {
		return err
	}
	if opts.JSON {
		for _, p := range plans {
			p.Proof = nil
			if err := cmdutil.PrintJSONLine(opts.IO.Out, p); err != nil {
				return err
			}
		}
		return nil
	}
	if len(plans) == 0 {
		fmt.Fprintln(opts.IO.ErrOut, "no purge plans")
		return nil
	}
	rows := make([][]string, 0, len(plans))
	for _, p := range plans {
		note := p.Contract
		if p.AbortReason != "" {
			note = p.AbortReason
		}
		rows = append(rows, []string{strconv.FormatInt(p.ID, 10), p.Class, p.Action, string(p.State), cmdutil.FormatStamp(p.Cutoff),
			cmdutil.HumanCount(p.Candidates), cmdutil.HumanCount(p.Pinned), cmdutil.HumanCount(p.Purged), audit.Who(p.PlannedPerson, p.PlannedDBUser),
			audit.Who(p.ApprovedPerson, p.ApprovedDBUser), audit.Who(p.RanPerson, p.RanDBUser), cmdutil.OrDash(note)})
	}
	return cmdutil.PrintTable(opts.IO.Out, []string{"plan", "class", "action", "state", "cutoff", "candidates", "pinned", "purged",
		"planned by", "approved by", "ran by", "contract / abort"}, rows)
}

// HorizonMaintainOptions are the flags of `idemctl horizon maintain`.
type HorizonMaintainOptions struct {
	IO *cmdutil.IOStreams
	f  *cmdutil.Factory
}

// NewCmdHorizonMaintain builds `idemctl horizon maintain`.
func NewCmdHorizonMaintain(f *cmdutil.Factory, runF func(*HorizonMaintainOptions) error) *cobra.Command {
	opts := &HorizonMaintainOptions{IO: f.IO, f: f}
	return &cobra.Command{
		Use:   "maintain",
		Short: "Create the inbox's daily partitions for the week ahead (run it daily)",
		Long: `The inbox body is partitioned by day (UTC) so that a purge can drop whole days.
This creates the partitions for today and the next 7 days; schedule it daily
(cron). A day without its partition still works: its rows land in the
default partition, which purges reach by batches.`,
		Example: `  idemctl horizon maintain
  idemctl horizon maintain -o json   # {"partitions_created":N}`,
		Args: cmdutil.MaxArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			pool, err := f.Pool(cmd.Context())
			if err != nil {
				return err
			}
			n, err := horizon.EnsurePartitions(cmd.Context(), pool)
			if err != nil {
				return err
			}
			if f.JSON() {
				return cmdutil.PrintJSONLine(opts.IO.Out, map[string]any{"partitions_created": n})
			}
			fmt.Fprintf(opts.IO.Out, "%d partition(s) created\n", n)
			return nil
		},
	}
}
