package horizon

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
)

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
Recorded in the audit log. The built-in source manual (pending manual
corrections) cannot be removed: a correction leaves it when marked done
(idemctl corrections done ID).`,
		Example: `  idemctl horizon source remove old-archive --reason "archive decommissioned (CHG-2211)"
  idemctl change approve 7   # by another person`,
		Args: cmdutil.MaxArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return cmdutil.UsageErr("a source name is required")
			}
			if args[0] == horizon.ManualSource {
				return cmdutil.WithCode(cmdutil.ExitUsage, fmt.Errorf("%w: it holds the pending manual corrections; "+
					"a correction leaves it when marked done (idemctl corrections list, idemctl corrections done ID)", horizon.ErrBuiltinSource))
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
