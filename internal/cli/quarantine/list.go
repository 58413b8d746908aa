package quarantine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/idemctl/idemctl/audit"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/quarantine"
)

// quarantineFilterFlags are the filter flags list, groups and reject share.
type quarantineFilterFlags struct {
	filter       quarantine.Filter
	since, until string
}

func (ff *quarantineFilterFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&ff.filter.Tenant, "tenant", "", "only this tenant_id")
	fs.StringVar(&ff.filter.Op, "op", "", "only this operation_id (exact)")
	fs.StringVar(&ff.filter.OpPrefix, "op-prefix", "", "only operation_ids starting with this")
	fs.StringVar(&ff.filter.Class, "class", "", "only this operation class (stored or incoming)")
	fs.StringVar(&ff.filter.Changed, "changed", "", "only records where the value at this JSON Pointer differs (/amount)")
	fs.StringVar(&ff.filter.Source, "source", "", `only records whose transport names this "source" (else "topic")`)
	fs.StringVar(&ff.since, "since", "", "only records last seen at or after a time or a duration ago (24h)")
	fs.StringVar(&ff.until, "until", "", "only records last seen before a time or a duration ago")
}

// build checks the flags and returns the filter; errors are usage errors
// naming the flag.
func (ff *quarantineFilterFlags) build(now time.Time) (quarantine.Filter, error) {
	f := ff.filter
	var err error
	if ff.since != "" {
		if f.Since, err = cmdutil.ParseSinceFlag(ff.since, now); err != nil {
			return f, cmdutil.UsageErr("--since: %v", err)
		}
	}
	if ff.until != "" {
		if f.Until, err = cmdutil.ParseSinceFlag(ff.until, now); err != nil {
			return f, cmdutil.UsageErr("--until: %v", err)
		}
	}
	if err := f.Validate(); err != nil {
		return f, cmdutil.WithCode(cmdutil.ExitUsage, err)
	}
	return f, nil
}

const quarantineFilterHelp = `Filters (all evaluated by the database, each with an index; combine freely):
  --tenant T          one tenant
  --op ID             one operation_id; --op-prefix P: operation_ids starting with P
  --class C           the stored or the incoming class
  --changed /amount   a value that differs at this JSON Pointer (RFC 6901)
  --source S          the incoming transport's "source" (else its "topic")
  --since, --until    last seen in [since, until): a time (2026-11-30,
                      2026-11-30T08:00:00Z) or a duration back from now (24h)`

// QuarantineListOptions are the flags of `idemctl quarantine list`.
type QuarantineListOptions struct {
	IO     *cmdutil.IOStreams
	JSON   bool
	Filter quarantine.Filter
	// Count prints only the totals.
	Count bool
	// Group narrows to one group of quarantine groups (open records).
	Group string
	f     *cmdutil.Factory
}

// NewCmdQuarantineList builds `idemctl quarantine list`.
func NewCmdQuarantineList(f *cmdutil.Factory, runF func(*QuarantineListOptions) error) *cobra.Command {
	opts := &QuarantineListOptions{IO: f.IO, f: f}
	var ff quarantineFilterFlags
	var status, after string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List quarantine records, newest activity first",
		Long: `List quarantine records, newest activity (last_seen) first, one page at a time.
Open records (waiting for a decision) by default.

` + quarantineFilterHelp + `

Paging is by keyset, as in idemctl audit list: when there are more, the next
page's cursor is printed on stderr; pass it to --after. With -o json every line
also carries its own "cursor". Before the page, stderr says how many records
match the filter (counted up to 10,000) and how old the oldest open one is;
--count prints only that (-o json: {"matching", "at_least", "oldest_open"}).

Columns: SEEN is how many times the conflicting request arrived, CHANGES how
many values differ from the stored payload. Nothing is written.

Exit code 2 for a bad filter or cursor.`,
		Example: `  idemctl quarantine list
  idemctl quarantine list --changed /amount --class payments.charge --since 2h
  idemctl quarantine list --status all --tenant acme --op-prefix s-063 --limit 100 -o json | jq -r .id
  idemctl quarantine list --source mobile --count
  idemctl quarantine list --group g-1a2b3c4d5e6f
  idemctl quarantine list --after 1764489600123456:42`,
		Args: cmdutil.MaxArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			filter, err := ff.build(f.Now())
			if err != nil {
				return err
			}
			st, err := quarantine.ParseStatus(status)
			if err != nil {
				return cmdutil.UsageErr("--status %q: use open, rejected, accepted or all", status)
			}
			filter.Status, filter.Limit = st, opts.Filter.Limit
			if filter.Limit < 1 || filter.Limit > quarantine.MaxLimit {
				return cmdutil.UsageErr("--limit must be between 1 and %d", quarantine.MaxLimit)
			}
			if after != "" {
				c, err := quarantine.ParseCursor(after)
				if err != nil {
					return cmdutil.WithCode(cmdutil.ExitUsage, err)
				}
				filter.After = &c
			}
			if opts.Group != "" && !quarantine.ValidGroupID(opts.Group) {
				return cmdutil.UsageErr("--group %q: use an id printed by idemctl quarantine groups (g-1a2b3c4d5e6f)", opts.Group)
			}
			opts.Filter = filter
			opts.JSON = f.JSON()
			if runF != nil {
				return runF(opts)
			}
			return quarantineListRun(cmd.Context(), opts)
		},
	}
	ff.add(cmd.Flags())
	cmd.Flags().StringVar(&status, "status", "open", "open, rejected, accepted or all")
	cmd.Flags().IntVar(&opts.Filter.Limit, "limit", quarantine.DefaultLimit, "records per page")
	cmd.Flags().StringVar(&after, "after", "", "cursor printed by the previous page")
	cmd.Flags().BoolVar(&opts.Count, "count", false, "print only how many records match and the oldest open one's age")
	cmd.Flags().StringVar(&opts.Group, "group", "", "only the open records of this group (idemctl quarantine groups)")
	return cmd
}

func quarantineListRun(ctx context.Context, opts *QuarantineListOptions) error {
	pool, err := opts.f.Pool(ctx)
	if err != nil {
		return err
	}
	if opts.Group != "" {
		f := opts.Filter
		f.After, f.Limit = nil, 0
		g, _, err := quarantine.ResolveGroup(ctx, pool, opts.Group, f)
		if err != nil {
			return readErr(err)
		}
		g.After, g.Limit = opts.Filter.After, opts.Filter.Limit
		opts.Filter = g
	}
	totals, err := quarantine.Count(ctx, pool, opts.Filter)
	if err != nil {
		return readErr(err)
	}
	if opts.Count {
		if opts.JSON {
			return cmdutil.PrintJSONLine(opts.IO.Out, totals)
		}
		_, err := fmt.Fprintln(opts.IO.Out, describeTotals(totals, opts.Filter.Status, opts.f.Now()))
		return err
	}
	page, err := quarantine.List(ctx, pool, opts.Filter)
	if err != nil {
		return readErr(err)
	}
	fmt.Fprintln(opts.IO.ErrOut, describeTotals(totals, opts.Filter.Status, opts.f.Now()))
	if opts.JSON {
		for _, s := range page.Items {
			if err := cmdutil.PrintJSONLine(opts.IO.Out, s); err != nil {
				return err
			}
		}
	} else if len(page.Items) > 0 {
		if err := cmdutil.PrintTable(opts.IO.Out, quarantineHeader,
			quarantineRows(page.Items)); err != nil {
			return err
		}
	}
	if page.Next != nil {
		fmt.Fprintf(opts.IO.ErrOut, "more records: add --after %s\n", page.Next)
	}
	return nil
}

// quarantineHeader heads the rows of quarantineRows.
var quarantineHeader = []string{"id", "tenant", "operation", "class", "status", "seen", "changes", "first seen", "last seen", "decided by"}

func quarantineRows(items []quarantine.Summary) [][]string {
	rows := make([][]string, 0, len(items))
	for _, s := range items {
		class := s.Class
		if s.IncomingClass != s.Class {
			class += " -> " + s.IncomingClass
		}
		status := string(s.Status)
		if s.NewOperationID != "" {
			status += " as " + s.NewOperationID
		}
		if s.StoredSide == quarantine.StoredProvider {
			status += " (provider's answer)"
		}
		rows = append(rows, []string{
			strconv.FormatInt(s.ID, 10), s.Tenant, s.OperationID, class, status,
			strconv.FormatInt(s.Occurrences, 10), strconv.Itoa(s.Changes),
			cmdutil.FormatStamp(s.FirstSeen), cmdutil.FormatStamp(s.LastSeen), audit.Who(s.DecidedPerson, s.DecidedDBUser),
		})
	}
	return rows
}

// describeTotals says how many records match and how old the oldest open one is.
func describeTotals(t quarantine.Totals, status quarantine.Status, now time.Time) string {
	if status == "" {
		status = quarantine.StatusOpen
	}
	what := string(status) + " "
	if status == quarantine.StatusAll {
		what = ""
	}
	n := cmdutil.HumanCount(t.Matching)
	if t.AtLeast {
		n = "at least " + n
	}
	s := fmt.Sprintf("%s %squarantine record(s) match", n, what)
	if t.OldestOpen != nil {
		s += fmt.Sprintf("; oldest open first seen %s ago (%s)", formatElapsed(now.Sub(*t.OldestOpen)), cmdutil.FormatStamp(*t.OldestOpen))
	}
	return s
}

// formatElapsed renders a duration the way a person reads an age: 3d4h, 2h05m, 40s.
func formatElapsed(d time.Duration) string {
	d = max(d, 0).Round(time.Second)
	switch {
	case d >= 24*time.Hour:
		return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
	case d >= time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	case d >= time.Minute:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%ds", int(d.Seconds()))
}

// QuarantineGroupsOptions are the flags of `idemctl quarantine groups`.
type QuarantineGroupsOptions struct {
	IO     *cmdutil.IOStreams
	JSON   bool
	Groups quarantine.GroupOptions
	f      *cmdutil.Factory
}

// NewCmdQuarantineGroups builds `idemctl quarantine groups`.
func NewCmdQuarantineGroups(f *cmdutil.Factory, runF func(*QuarantineGroupsOptions) error) *cobra.Command {
	opts := &QuarantineGroupsOptions{IO: f.IO, f: f}
	var ff quarantineFilterFlags
	var by []string
	cmd := &cobra.Command{
		Use:   "groups",
		Short: "Group the open records by class and differing fields: one group, one cause",
		Long: `Group the open quarantine records by class (stored -> incoming) and by the set
of differing fields (JSON Pointers), and with --by by tenant and/or by the
transport's source, largest group first: how many records, first and last
seen, and the newest record of each as an example. After an incident this is
where "2,400 records, all /amount changed, all from the mobile client between
02:10 and 02:14" shows.

Each group has an ID (g-..., gt-... with tenants, gs-... with sources) that
stays the same while records with its key stay open: reject --group ID decides
the group after a preview (--dry-run shows it only); list --class C --changed P
pages through records like its own.

` + quarantineFilterHelp + `

Nothing is written. Exit code 2 for a bad filter.`,
		Example: `  idemctl quarantine groups
  idemctl quarantine groups --by tenant,source --since 6h
  idemctl quarantine groups --class payments.charge -o json | jq '{id, count, fields}'
  idemctl quarantine reject --group g-1a2b3c4d5e6f --reason "mobile 4.2 amount bug, INC-881" --dry-run`,
		Args: cmdutil.MaxArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			filter, err := ff.build(f.Now())
			if err != nil {
				return err
			}
			opts.Groups.Filter = filter
			for _, b := range by {
				switch strings.TrimSpace(b) {
				case "tenant":
					opts.Groups.By.Tenant = true
				case "source":
					opts.Groups.By.Source = true
				default:
					return cmdutil.UsageErr("--by %q: use tenant, source or tenant,source", b)
				}
			}
			if opts.Groups.Limit < 1 || opts.Groups.Limit > quarantine.MaxLimit {
				return cmdutil.UsageErr("--limit must be between 1 and %d", quarantine.MaxLimit)
			}
			opts.JSON = f.JSON()
			if runF != nil {
				return runF(opts)
			}
			return quarantineGroupsRun(cmd.Context(), opts)
		},
	}
	ff.add(cmd.Flags())
	cmd.Flags().StringSliceVar(&by, "by", nil, "also split groups by tenant and/or source (tenant,source)")
	cmd.Flags().IntVar(&opts.Groups.Limit, "limit", quarantine.DefaultLimit, "groups shown, largest first")
	return cmd
}

func quarantineGroupsRun(ctx context.Context, opts *QuarantineGroupsOptions) error {
	pool, err := opts.f.Pool(ctx)
	if err != nil {
		return err
	}
	groups, err := quarantine.Groups(ctx, pool, opts.Groups)
	if err != nil {
		return readErr(err)
	}
	if opts.JSON {
		for _, g := range groups {
			if err := cmdutil.PrintJSONLine(opts.IO.Out, g); err != nil {
				return err
			}
		}
		return nil
	}
	if len(groups) == 0 {
		fmt.Fprintln(opts.IO.ErrOut, "no open quarantine records match")
		return nil
	}
	header := []string{"group", "count", "class", "changed"}
	if opts.Groups.By.Tenant {
		header = append(header, "tenant")
	}
	if opts.Groups.By.Source {
		header = append(header, "source")
	}
	header = append(header, "first seen", "last seen", "example")
	rows := make([][]string, 0, len(groups))
	for _, g := range groups {
		row := []string{g.ID, cmdutil.HumanCount(g.Count), groupClass(g.GroupKey), g.Changed()}
		if g.Tenant != nil {
			row = append(row, *g.Tenant)
		}
		if g.Source != nil {
			row = append(row, cmdutil.OrDash(*g.Source))
		}
		row = append(row, cmdutil.FormatStamp(g.FirstSeen), cmdutil.FormatStamp(g.LastSeen),
			fmt.Sprintf("#%d %s/%s", g.Example.ID, g.Example.Tenant, g.Example.OperationID))
		rows = append(rows, row)
	}
	if err := cmdutil.PrintTable(opts.IO.Out, header, rows); err != nil {
		return err
	}
	if len(groups) == opts.Groups.Limit {
		fmt.Fprintf(opts.IO.ErrOut, "more groups may follow: raise --limit or narrow the filter\n")
	}
	return nil
}

func groupClass(k quarantine.GroupKey) string {
	if k.IncomingClass != k.Class {
		return k.Class + " -> " + k.IncomingClass
	}
	return k.Class
}

// readErr gives a reading command's error its exit code. Those commands
// refuse nothing by a rule, so no database error is ExitInvalid there: an
// unknown record or group is ExitNotFound, a bad filter ExitUsage, and a
// login the database does not let read the quarantine (42501: a service's
// login) ExitFailure, with the role the command needs, as any other error.
func readErr(err error) error {
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, quarantine.ErrNotFound):
		return cmdutil.WithCode(cmdutil.ExitNotFound, err)
	case errors.Is(err, quarantine.ErrInvalidFilter):
		return cmdutil.WithCode(cmdutil.ExitUsage, err)
	case errors.As(err, &pgErr) && pgErr.Code == "42501":
		return cmdutil.WithCode(cmdutil.ExitFailure, fmt.Errorf("%w; reading the quarantine needs an operator's or an auditor's login "+
			"(granted the schema's operator or auditor role, idem_operator or idem_auditor by default)", err))
	}
	return err
}
