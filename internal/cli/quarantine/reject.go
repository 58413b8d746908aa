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

	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/audit"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/quarantine"
)

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
