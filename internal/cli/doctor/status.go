package doctor

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/health"
)

// StatusOptions are the flags of `idemctl status`.
type StatusOptions struct {
	IO *cmdutil.IOStreams
	// Format is table, json or prometheus.
	Format string
	f      *cmdutil.Factory
}

// NewCmdStatus builds `idemctl status`.
func NewCmdStatus(f *cmdutil.Factory, runF func(*StatusOptions) error) *cobra.Command {
	opts := &StatusOptions{IO: f.IO, f: f}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "The numbers on-call and dashboards want: quarantine, traffic, inbox, partitions, purges, sources",
		Long: `Print, from the primary's clock: open quarantine records and the oldest;
per class the operations applied in the last hour and day, the bodies the
inbox keeps and the oldest of them, and the last finished purge; how far the
daily inbox partitions reach; every replay source and its last probe (the
evidence of the newest plan that probed it).

-o json prints one object; -o prometheus prints the Prometheus text format,
for node_exporter's textfile collector. It reads the whole inbox once: run
it every few minutes, not every second. Nothing is written.`,
		Example: `  idemctl status
  idemctl status -o json | jq .quarantine
  # node_exporter textfile collector, every 5 minutes from cron
  idemctl status -o prometheus > /var/lib/node_exporter/idemctl.prom.tmp && mv /var/lib/node_exporter/idemctl.prom.tmp /var/lib/node_exporter/idemctl.prom`,
		Args: cmdutil.MaxArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Format = "table"
			switch {
			case f.Output == "prometheus":
				opts.Format = "prometheus"
			case f.JSON():
				opts.Format = "json"
			}
			if runF != nil {
				return runF(opts)
			}
			return statusRun(cmd.Context(), opts)
		},
	}
	return cmd
}

func statusRun(ctx context.Context, opts *StatusOptions) error {
	pool, err := opts.f.Pool(ctx)
	if err != nil {
		return err
	}
	st, err := health.ReadStatus(ctx, pool)
	if err != nil {
		return err
	}
	switch opts.Format {
	case "prometheus":
		return st.WritePrometheus(opts.IO.Out)
	case "json":
		return cmdutil.PrintJSONLine(opts.IO.Out, st)
	}
	age := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return cmdutil.FormatStamp(*t) + " (" + st.At.Sub(*t).Round(time.Second).String() + " ago)"
	}
	until := "none (idemctl horizon maintain)"
	if st.PartitionsUntil != nil {
		until = st.PartitionsUntil.UTC().Format("2006-01-02")
	}
	fmt.Fprintf(opts.IO.Out, "at %s: %s open quarantine record(s), oldest %s; daily partitions until %s\n",
		cmdutil.FormatStamp(st.At), cmdutil.HumanCount(st.Quarantine.Open), age(st.Quarantine.OldestOpen), until)
	rows := make([][]string, 0, len(st.Classes))
	for _, c := range st.Classes {
		rows = append(rows, []string{c.Class, c.Retention, cmdutil.HumanCount(c.LastHour), cmdutil.HumanCount(c.LastDay),
			cmdutil.HumanCount(c.Bodies), age(c.OldestBody), age(c.LastPurge)})
	}
	if err := cmdutil.PrintTable(opts.IO.Out, []string{"class", "retention", "ops 1h", "ops 1d", "bodies", "oldest body", "last purge"}, rows); err != nil {
		return err
	}
	rows = rows[:0]
	for _, s := range st.Sources {
		rows = append(rows, []string{s.Name, s.Kind, age(s.LastProbe), cmdutil.OrDash(s.Verdict)})
	}
	return cmdutil.PrintTable(opts.IO.Out, []string{"source", "kind", "last probe", "verdict"}, rows)
}
