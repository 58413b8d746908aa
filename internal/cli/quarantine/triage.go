package quarantine

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

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
			return quarantineErr(err, cmdutil.ExitInvalid)
		}
		g.After, g.Limit = opts.Filter.After, opts.Filter.Limit
		opts.Filter = g
	}
	totals, err := quarantine.Count(ctx, pool, opts.Filter)
	if err != nil {
		return quarantineErr(err, cmdutil.ExitFailure)
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
		return quarantineErr(err, cmdutil.ExitFailure)
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
		return quarantineErr(err, cmdutil.ExitFailure)
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

// QuarantineRejectOptions are the flags of `idemctl quarantine reject`.
type QuarantineRejectOptions struct {
	IO   *cmdutil.IOStreams
	JSON bool
	// ID is one record; zero for a bulk reject (Selection).
	ID        int64
	Selection quarantine.Selection
	// Group is --group, resolved against Selection.Filter when run.
	Group    string
	Reason   string
	Operator string
	DryRun   bool
	Yes      bool
	Batch    int
	// Token is a bulk preview's token: the run decides exactly its set.
	Token string
	f     *cmdutil.Factory
}

// NewCmdQuarantineReject builds `idemctl quarantine reject`.
func NewCmdQuarantineReject(f *cmdutil.Factory, runF func(*QuarantineRejectOptions) error) *cobra.Command {
	opts := &QuarantineRejectOptions{IO: f.IO, f: f}
	var ff quarantineFilterFlags
	cmd := &cobra.Command{
		Use:   "reject (ID | - | --group ID | FILTERS) --reason TEXT",
		Short: "Decide that conflicting requests must never run: one record, a group, a filter or ids on stdin",
		Long: `Reject quarantine records: each conflicting request stays refused for ever
(every replay of it answers conflict, runs nothing, and is counted); the
original payload keeps answering with its saved response. The records stay as
evidence. Decisions are final and are recorded with --reason, the operator
(--operator, IDEMCTL_OPERATOR, else the OS user) and the database user, each
record with its own audit row in the same transaction as its decision.

One record: reject ID; on a terminal it shows the record and asks first
(--yes skips the question and is required without one). Many (bulk):
  reject --group ID     a group printed by idemctl quarantine groups
  reject FILTERS        the open records matching the filters (at least one)
  reject -              the ids on stdin, one a line ("42", "#42", or the JSON
                        lines of quarantine list -o json)

A bulk reject acts only on what its preview showed. Without --token it only
previews: how many open records it would decide, a sample, and the filter;
the exact set of record ids is stored on the server and a token printed
(single use, yours only, valid for an hour; --dry-run stores none). The real
run is reject --token TOKEN --reason TEXT: it decides those records still
open, names the ones left out (decided meanwhile) and the ones that joined the
selection since (not decided), asks on a terminal (--yes skips the question
and is required without one), and decides in transactions of --batch records,
with progress on stderr. --yes without --token is refused (exit 2), so a
command line from shell history decides nothing; so is an unknown, used,
expired or another person's token. Ctrl-C stops it between batches: what was
committed stays; preview again to decide what is left. Every audit row of one
run carries its label (details.bulk_run).

` + quarantineFilterHelp + ``,
		Example: `  idemctl quarantine reject 42 --reason "amount tampering, ticket PAY-123"
  idemctl quarantine reject --group g-1a2b3c4d5e6f --reason "mobile 4.2 amount bug, INC-881"
  idemctl quarantine reject --token pv-3f9c1e2a7b4d4c0e9a8f6b5d4c3b2a19 --reason "mobile 4.2 amount bug, INC-881" --yes
  idemctl quarantine reject --changed /amount --class payments.charge --since 2h --reason "INC-881"
  idemctl quarantine list --op-prefix s-06 -o json | idemctl quarantine reject - --reason "INC-881"`,
		Args: cmdutil.MaxArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			filter, err := ff.build(f.Now())
			if err != nil {
				return err
			}
			if strings.TrimSpace(opts.Reason) == "" {
				return cmdutil.UsageErr("--reason is required: say why, for the record")
			}
			if opts.Batch < 1 || opts.Batch > quarantine.MaxBatch {
				return cmdutil.UsageErr("--batch must be between 1 and %d", quarantine.MaxBatch)
			}
			bulk := filter.Narrowed() || opts.Group != ""
			if opts.Token != "" {
				if bulk || len(args) > 0 {
					return cmdutil.UsageErr("--token decides the set its preview stored: give no record ID, -, --group or filters with it")
				}
				if err := cmdutil.NeedYes(f.IO, opts.Yes, "reject is final"); err != nil {
					return err
				}
				opts.Operator, opts.JSON = f.Operator(), f.JSON()
				if runF != nil {
					return runF(opts)
				}
				return quarantineTokenRejectRun(cmd.Context(), opts)
			}
			switch {
			case len(args) == 1 && args[0] == "-":
				if bulk {
					return cmdutil.UsageErr("ids on stdin (-) exclude --group and filters: give one or the other")
				}
				ids, err := readRecordIDs(f.IO.In)
				if err != nil {
					return err
				}
				opts.Selection.IDs = ids
			case len(args) == 1:
				if bulk {
					return cmdutil.UsageErr("a record ID excludes --group and filters: give one or the other")
				}
				if opts.ID, err = parseRecordID(args); err != nil {
					return err
				}
			case !bulk:
				return cmdutil.UsageErr("name what to reject: a record ID, - for ids on stdin, --group ID, or filters (see --help)")
			default:
				opts.Selection.Filter = filter
			}
			if opts.Group != "" && !quarantine.ValidGroupID(opts.Group) {
				return cmdutil.UsageErr("--group %q: use an id printed by idemctl quarantine groups (g-1a2b3c4d5e6f)", opts.Group)
			}
			if opts.ID == 0 && opts.Yes {
				return cmdutil.UsageErr("--yes without --token decides nothing: a bulk reject previews first, then runs with the --token it prints")
			}
			if opts.ID != 0 && !opts.DryRun {
				if err := cmdutil.NeedYes(f.IO, opts.Yes, "reject is final (or preview it with --dry-run)"); err != nil {
					return err
				}
			}
			opts.Operator, opts.JSON = f.Operator(), f.JSON()
			if runF != nil {
				return runF(opts)
			}
			if opts.ID != 0 {
				return quarantineRejectRun(cmd.Context(), opts)
			}
			return quarantineBulkRejectRun(cmd.Context(), opts)
		},
	}
	ff.add(cmd.Flags())
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "why (required; recorded with every decision)")
	cmd.Flags().StringVar(&opts.Group, "group", "", "reject the open records of this group (idemctl quarantine groups)")
	cmd.Flags().BoolVar(&opts.DryRun, "dry-run", false, "print the preview and change nothing")
	cmd.Flags().BoolVarP(&opts.Yes, "yes", "y", false, "do not ask for confirmation on a terminal")
	cmd.Flags().IntVar(&opts.Batch, "batch", quarantine.DefaultBatch, "records decided per transaction")
	cmd.Flags().StringVar(&opts.Token, "token", "", "decide exactly what the preview that printed this token showed")
	return cmd
}

func quarantineRejectRun(ctx context.Context, opts *QuarantineRejectOptions) error {
	pool, err := opts.f.Pool(ctx)
	if err != nil {
		return err
	}
	if opts.DryRun {
		rec, err := quarantine.Show(ctx, pool, opts.ID)
		if err != nil {
			return quarantineErr(err, cmdutil.ExitInvalid)
		}
		fmt.Fprintf(opts.IO.ErrOut, "dry run: would reject record %d (%s/%s, %s): nothing decided\n", rec.ID, rec.Tenant, rec.OperationID, rec.Status)
		if opts.JSON {
			return cmdutil.PrintJSONLine(opts.IO.Out, map[string]any{"dry_run": true, "record": rec})
		}
		return nil
	}
	if !opts.Yes && opts.IO.CanPrompt() {
		rec, err := quarantine.Show(ctx, pool, opts.ID)
		if err != nil {
			return quarantineErr(err, cmdutil.ExitInvalid)
		}
		if err := decidedAlready(rec); err != nil {
			return err
		}
		question := fmt.Sprintf("Reject record %d (%s/%s, class %s, %d change(s)) for ever?",
			rec.ID, rec.Tenant, rec.OperationID, rec.IncomingClass, len(rec.Diff))
		if err := cmdutil.Confirm(opts.IO, false, question, "nothing done"); err != nil {
			return err
		}
	}
	rec, err := quarantine.Reject(ctx, pool, opts.ID, opts.Operator, opts.Reason)
	if err != nil {
		return quarantineErr(err, cmdutil.ExitInvalid)
	}
	if opts.JSON {
		return cmdutil.PrintJSONLine(opts.IO.Out, rec)
	}
	_, err = fmt.Fprintf(opts.IO.Out, "Quarantine record %d (%s/%s) rejected by %s: replays of that payload stay refused.\nAudit row %d.\n",
		rec.ID, rec.Tenant, rec.OperationID, audit.Who(rec.Decision.Person, rec.Decision.DBUser), rec.Decision.AuditID)
	return err
}

func quarantineBulkRejectRun(ctx context.Context, opts *QuarantineRejectOptions) error {
	pool, err := opts.f.Pool(ctx)
	if err != nil {
		return err
	}
	sel := opts.Selection
	if opts.Group != "" {
		if sel.Filter, _, err = quarantine.ResolveGroup(ctx, pool, opts.Group, sel.Filter); err != nil {
			return quarantineErr(err, cmdutil.ExitInvalid)
		}
	}
	preview, err := quarantine.PreviewBulk(ctx, pool, sel)
	if errors.Is(err, quarantine.ErrNothingToDecide) {
		fmt.Fprintf(opts.IO.ErrOut, "nothing to reject: %v\n", err)
		if opts.JSON {
			return cmdutil.PrintJSONLine(opts.IO.Out, map[string]any{"preview": preview, "dry_run": opts.DryRun, "decided": 0})
		}
		return nil
	}
	if err != nil {
		return quarantineErr(err, cmdutil.ExitInvalid)
	}
	printBulkPreview(opts.IO, preview, opts.Group, "reject")
	if opts.DryRun {
		fmt.Fprintln(opts.IO.ErrOut, "dry run: nothing decided")
		if opts.JSON {
			return cmdutil.PrintJSONLine(opts.IO.Out, map[string]any{"preview": preview, "dry_run": true})
		}
		return nil
	}
	token, err := quarantine.StorePreview(ctx, pool, quarantine.PreviewReject, preview)
	if err != nil {
		return quarantineErr(bulkPlanErr(err), cmdutil.ExitInvalid)
	}
	if opts.JSON {
		return cmdutil.PrintJSONLine(opts.IO.Out, map[string]any{"preview": preview, "token": token, "decided": 0})
	}
	_, err = fmt.Fprintf(opts.IO.Out, "Preview token %s (yours, single use, valid for an hour). Nothing decided. To reject these %s record(s):\n"+
		"  idemctl quarantine reject --token %s --reason %q --yes\n", token, cmdutil.HumanCount(preview.Open), token, opts.Reason)
	return err
}

// quarantineTokenRejectRun rejects exactly the records a preview's token
// stored, naming those left out and those that joined since.
func quarantineTokenRejectRun(ctx context.Context, opts *QuarantineRejectOptions) error {
	pool, err := opts.f.Pool(ctx)
	if err != nil {
		return err
	}
	taken, err := quarantine.TakePreview(ctx, pool, opts.Token, quarantine.PreviewReject)
	if errors.Is(err, quarantine.ErrToken) {
		return cmdutil.WithCode(cmdutil.ExitUsage, err)
	}
	if err != nil {
		return quarantineErr(bulkPlanErr(err), cmdutil.ExitInvalid)
	}
	joined, err := quarantine.Joined(ctx, pool, taken)
	if err != nil {
		return quarantineErr(err, cmdutil.ExitInvalid)
	}
	if err := cmdutil.Confirm(opts.IO, opts.Yes, fmt.Sprintf("Reject the %s record(s) of the preview with reason %q?", cmdutil.HumanCount(int64(len(taken.IDs))), opts.Reason), "nothing done (the token is used: preview again)"); err != nil {
		return err
	}
	res, err := quarantine.RejectBulk(ctx, pool, quarantine.Selection{IDs: taken.IDs}, quarantine.BulkOptions{
		Operator: opts.Operator, Reason: opts.Reason, Batch: opts.Batch,
		Progress: func(r quarantine.BulkResult) {
			fmt.Fprintf(opts.IO.ErrOut, "rejected %s of %s (%s left out, %d batch(es))\n",
				cmdutil.HumanCount(r.Decided), cmdutil.HumanCount(int64(len(taken.IDs))), cmdutil.HumanCount(r.Skipped), r.Batches)
		},
	})
	if opts.JSON {
		if jerr := cmdutil.PrintJSONLine(opts.IO.Out, map[string]any{"previewed": len(taken.IDs), "joined": joined, "result": res}); jerr != nil && err == nil {
			err = jerr
		}
	} else {
		fmt.Fprintf(opts.IO.Out, "Rejected %s record(s) of the preview (%s decided meanwhile, left out) in %d transaction(s); run %s, audit rows %d-%d.\n",
			cmdutil.HumanCount(res.Decided), cmdutil.HumanCount(res.Skipped), res.Batches, res.Run, res.FirstAudit, res.LastAudit)
		if len(joined) > 0 {
			what := "selection"
			if taken.Filter.Group != nil {
				what = "group"
			}
			fmt.Fprintf(opts.IO.Out, "%d records joined the %s after the preview: not decided (%s)\n", len(joined), what, joinIDs(joined, 20))
		}
	}
	if err != nil {
		fmt.Fprintf(opts.IO.ErrOut, "stopped after %s decision(s), all committed; preview again to decide what is left\n", cmdutil.HumanCount(res.Decided))
		return quarantineErr(err, cmdutil.ExitFailure)
	}
	if res.Interrupted {
		fmt.Fprintf(opts.IO.ErrOut, "interrupted after %s decision(s), all committed; preview again to decide what is left\n", cmdutil.HumanCount(res.Decided))
		return cmdutil.SilentExit{Code: cmdutil.ExitFailure}
	}
	return nil
}

// joinIDs lists ids, at most n, saying how many more there are.
func joinIDs(ids []int64, n int) string {
	var b strings.Builder
	for i, id := range ids {
		if i == n {
			fmt.Fprintf(&b, " and %d more", len(ids)-n)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "#%d", id)
	}
	return b.String()
}

// printBulkPreview prints what a bulk decision will decide, on stderr (the
// data of -o json goes to stdout).
func printBulkPreview(io *cmdutil.IOStreams, p quarantine.Preview, group, verb string) {
	w := io.ErrOut
	fmt.Fprintf(w, "%s %s open quarantine record(s)", verb, cmdutil.HumanCount(p.Open))
	if p.Decided > 0 {
		fmt.Fprintf(w, " (%s of the ids already decided: skipped)", cmdutil.HumanCount(p.Decided))
	}
	fmt.Fprintln(w)
	if group != "" {
		fmt.Fprintf(w, "group:  %s\n", group)
	}
	if p.Filter != nil {
		fmt.Fprintf(w, "filter: %s\n", p.Filter.Describe())
	}
	fmt.Fprintf(w, "sample (%d of %s):\n", len(p.Sample), cmdutil.HumanCount(p.Open))
	_ = cmdutil.PrintTable(w, quarantineHeader,
		quarantineRows(p.Sample))
}

// readRecordIDs reads record ids from stdin, one a line: "42", "#42", or a
// JSON object with an "id" (quarantine list -o json). Blank lines are
// skipped; anything else is a usage error naming the line.
func readRecordIDs(r io.Reader) ([]int64, error) {
	var ids []int64
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var id int64
		var err error
		if strings.HasPrefix(line, "{") {
			var v struct {
				ID int64 `json:"id"`
			}
			err = json.Unmarshal([]byte(line), &v)
			id = v.ID
		} else {
			id, err = strconv.ParseInt(strings.TrimPrefix(line, "#"), 10, 64)
		}
		if err != nil || id <= 0 {
			return nil, cmdutil.UsageErr("stdin line %d: %q is not a record id: want one id a line (42) or quarantine list -o json lines", n, cmdutil.ClipText(line, 40))
		}
		if len(ids) == quarantine.MaxIDs {
			return nil, cmdutil.UsageErr("more than %d ids on stdin: split them", quarantine.MaxIDs)
		}
		ids = append(ids, id)
	}
	if err := sc.Err(); err != nil {
		return nil, cmdutil.UsageErr("reading ids from stdin: %v", err)
	}
	if len(ids) == 0 {
		return nil, cmdutil.UsageErr("no record ids on stdin: pipe ids, one a line (idemctl quarantine list -o json | idemctl quarantine reject - ...)")
	}
	return ids, nil
}
