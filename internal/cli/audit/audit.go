// Package audit holds `idemctl audit` (list, verify): the audit log read
// back, and its hash chain checked against the anchors kept outside the database.
package audit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/audit"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
)

// NewCmdAudit builds `idemctl audit` and its subcommands.
func NewCmdAudit(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit <command>",
		Short: "Read and verify the audit log of operator actions",
		Long: `idem.audit records every operator action (resolve runs, quarantine decisions
and exports, purge plans, approvals and executions) with the operator, the
database user, the database time and a JSON details object. It is append-only
(the database refuses UPDATE, DELETE and TRUNCATE) and hash-chained: each row's
hash covers its content and the previous row's hash, so a row changed, removed
or inserted behind the log's back, even by a superuser with the triggers
disabled, breaks the chain where it happened.`,
		Example: `  idemctl audit list --action quarantine
  idemctl audit verify`,
	}
	cmd.AddCommand(NewCmdAuditList(f, nil), NewCmdAuditVerify(f, nil))
	return cmd
}

// AuditListOptions are the flags of `idemctl audit list`.
type AuditListOptions struct {
	IO     *cmdutil.IOStreams
	JSON   bool
	Filter audit.Filter
	f      *cmdutil.Factory
}

// NewCmdAuditList builds `idemctl audit list`.
func NewCmdAuditList(f *cmdutil.Factory, runF func(*AuditListOptions) error) *cobra.Command {
	opts := &AuditListOptions{IO: f.IO, f: f}
	var since, until, after string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List audit rows, newest first",
		Long: `List audit rows, newest first. --action matches exactly or a whole namespace
(--action quarantine matches quarantine.reject, quarantine.accept_as_new and
quarantine.export). --actor matches who did it as the ACTOR column shows it:
the person (alice) or the login (op1) of "alice (op1)", exactly; --label
matches the self-declared --operator label instead (the OPERATOR column; the
"actor" field of -o json). --since and --until take a time (2026-11-30,
2026-11-30T08:00:00Z) or a duration back from now (24h).

Paging is by keyset, as in idemctl quarantine list: when there are more rows
than --limit, the cursor of the next page is printed on stderr; pass it to
--after. (An audit cursor is the last row id shown; --before ID is kept as an
alias.) Nothing is written.`,
		Example: `  idemctl audit list
  idemctl audit list --action quarantine --since 24h
  idemctl audit list --target quarantine:42 -o json | jq .details
  idemctl audit list --actor alice --limit 20 --after 1200
  idemctl audit list --label nightly-resolve`,
		Args: cmdutil.MaxArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if since != "" {
				if opts.Filter.Since, err = cmdutil.ParseSinceFlag(since, f.Now()); err != nil {
					return cmdutil.UsageErr("--since: %v", err)
				}
			}
			if until != "" {
				if opts.Filter.Until, err = cmdutil.ParseSinceFlag(until, f.Now()); err != nil {
					return cmdutil.UsageErr("--until: %v", err)
				}
			}
			if opts.Filter.Limit < 1 || opts.Filter.Limit > audit.MaxLimit {
				return cmdutil.UsageErr("--limit must be between 1 and %d", audit.MaxLimit)
			}
			if after != "" {
				if opts.Filter.Before != 0 {
					return cmdutil.UsageErr("--after and --before are the same cursor: give one")
				}
				id, err := strconv.ParseInt(after, 10, 64)
				if err != nil || id <= 0 {
					return cmdutil.UsageErr("--after %q: use the cursor printed by the previous page (a row id)", after)
				}
				opts.Filter.Before = id
			}
			if opts.Filter.Before < 0 {
				return cmdutil.UsageErr("--before must be a row id")
			}
			opts.JSON = f.JSON()
			if runF != nil {
				return runF(opts)
			}
			return auditListRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Filter.Action, "action", "", "only this action or namespace (quarantine, quarantine.reject)")
	cmd.Flags().StringVar(&opts.Filter.Who, "actor", "", "only rows of this person or login (the ACTOR column: person (login))")
	cmd.Flags().StringVar(&opts.Filter.Actor, "label", "", "only rows whose --operator label is this (the OPERATOR column)")
	cmd.Flags().StringVar(&opts.Filter.Target, "target", "", "only this target (quarantine:42)")
	cmd.Flags().StringVar(&since, "since", "", "only rows at or after a time or a duration ago")
	cmd.Flags().StringVar(&until, "until", "", "only rows before a time or a duration ago")
	cmd.Flags().IntVar(&opts.Filter.Limit, "limit", audit.DefaultLimit, "rows per page")
	cmd.Flags().StringVar(&after, "after", "", "cursor printed by the previous page")
	cmd.Flags().Int64Var(&opts.Filter.Before, "before", 0, "only rows older than this id (the next page)")
	_ = cmd.Flags().MarkHidden("before")
	return cmd
}

func auditListRun(ctx context.Context, opts *AuditListOptions) error {
	pool, err := opts.f.Pool(ctx)
	if err != nil {
		return err
	}
	rows, err := audit.List(ctx, pool, opts.Filter)
	if err != nil {
		if errors.Is(err, audit.ErrInvalidFilter) {
			return cmdutil.WithCode(cmdutil.ExitUsage, err)
		}
		return err
	}
	if opts.JSON {
		for _, r := range rows {
			if err := cmdutil.PrintJSONLine(opts.IO.Out, r); err != nil {
				return err
			}
		}
	} else if len(rows) == 0 {
		fmt.Fprintln(opts.IO.ErrOut, "no audit rows")
	} else {
		table := make([][]string, 0, len(rows))
		for _, r := range rows {
			table = append(table, []string{
				strconv.FormatInt(r.ID, 10), cmdutil.FormatStamp(r.At), r.Who(), r.Action,
				cmdutil.OrDash(r.Target), r.Actor, cmdutil.ClipText(string(r.Details), 80),
			})
		}
		// actor is the person and the login (four eyes compare persons);
		// operator the self-declared --operator label, for the record.
		if err := cmdutil.PrintTable(opts.IO.Out, []string{"id", "at", "actor", "action", "target", "operator", "details"}, table); err != nil {
			return err
		}
	}
	if len(rows) == opts.Filter.Limit && rows[len(rows)-1].ID > 1 {
		fmt.Fprintf(opts.IO.ErrOut, "more rows may follow: add --after %d\n", rows[len(rows)-1].ID)
	}
	return nil
}

// AuditVerifyOptions are the flags of `idemctl audit verify`.
type AuditVerifyOptions struct {
	IO      *cmdutil.IOStreams
	JSON    bool
	Anchors []audit.Anchor
	// AnchorFile is where the last verified head of each database is kept.
	AnchorFile string
	f          *cmdutil.Factory
}

// NewCmdAuditVerify builds `idemctl audit verify`.
func NewCmdAuditVerify(f *cmdutil.Factory, runF func(*AuditVerifyOptions) error) *cobra.Command {
	opts := &AuditVerifyOptions{IO: f.IO, f: f}
	var anchors []string
	cmd := &cobra.Command{
		Use:   "verify [--anchor ID:HASH]... [--anchor-file PATH]",
		Short: "Check the whole audit chain against the anchor kept last time; exit 5 at the first broken row",
		Long: `Walk the whole audit log and check, row by row: ids run 1, 2, 3... without a
gap (a gap is a deleted row); each prev_hash is the previous row's hash; each
hash recomputes from the row's content; the chain's head (idem.audit_head)
records the last row. The first broken row is named, with why:

  audit chain broken at row N: <why>

A row changed, removed or inserted behind the log's back (for example by a
superuser with the triggers disabled) is found. Someone with full control could
still rewrite every row from some point on, recomputing hashes and head, or cut
the log's end: so verify keeps the head it verified (its anchor) in a file of
yours, outside the database, and checks every later run against it, saying
what moved: rows rewritten (an anchored row's hash changed), rows missing and
the head behind the anchor (the log ends before the kept head). The file is
--anchor-file, else $IDEMCTL_AUDIT_ANCHOR_FILE, else
$XDG_STATE_HOME/idemctl/audit-anchors.json (~/.local/state/...), written mode
600, one entry per database; keep a copy elsewhere too. An entry names the
database by its address (host:port/dbname) and its own identity
(idem.database_id(), stamped once by idemctl migrate). That identity is a row
of the database, which whoever controls it can stamp again: so when this
identity has no entry but the address has one (of another identity, or kept
by an older idemctl under the address only), the log is compared with the one
verified last there and the summary names it. A database really dropped and
created again at the same address then fails (exit 5): its verifier moves
that entry aside, as the message says, and verifies again. A missing file, or
no entry for the address, is a first run (said so, and the head is kept); an
unreadable or corrupt file,
or one others may read or write, is an error (exit 2) and is never replaced.
Only an intact chain moves the anchor. --anchor checks rows recorded elsewhere
(a ticket, a chat) as well. The summary says what the chain was compared with:
the row kept by the last intact verify (and when), and how many --anchor rows.

Exit code 0: the chain is intact. Exit code 5: it is broken (the report names
the first broken row and what moved). Exit code 2: the anchor file is
unusable. Exit code 1: it could not be read (the database is unreachable).
Nothing is written to the database.`,
		Example: `  idemctl audit verify
  idemctl audit verify --anchor-file /secure/idemctl-anchors.json
  idemctl audit verify --anchor 1200:sha256:3f5c...e9 -o json`,
		Args: cmdutil.MaxArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, s := range anchors {
				a, err := audit.ParseAnchor(s)
				if err != nil {
					return cmdutil.WithCode(cmdutil.ExitUsage, err)
				}
				opts.Anchors = append(opts.Anchors, a)
			}
			opts.JSON = f.JSON()
			if runF != nil {
				return runF(opts)
			}
			return auditVerifyRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringArrayVar(&anchors, "anchor", nil, "a row hash recorded elsewhere, ID:sha256:<hex> (repeatable)")
	cmd.Flags().StringVar(&opts.AnchorFile, "anchor-file", "", "where verified heads are kept (default $"+audit.AnchorFileEnv+", else ~/.local/state/idemctl/audit-anchors.json)")
	return cmd
}

// OpenAnchors is the verifier's anchor file: path, else the default.
func OpenAnchors(path string) (audit.AnchorStore, error) {
	if path != "" {
		return audit.AnchorStore{Path: path}, nil
	}
	p, err := audit.DefaultAnchorPath()
	if err != nil {
		return audit.AnchorStore{}, cmdutil.WithCode(cmdutil.ExitUsage, err)
	}
	return audit.AnchorStore{Path: p}, nil
}

// AnchorKey names the database in the anchor file: host, port and database
// as the connection reached them, and the database's own identity
// (idem.database_id(): stamped once by migrate), so that a database dropped
// and created again at the same address is told apart from a rewritten log.
// legacy is the key without the identity, under which anchors were kept
// before.
func AnchorKey(ctx context.Context, pool *pgxpool.Pool) (key, legacy string, err error) {
	c := pool.Config().ConnConfig
	legacy = fmt.Sprintf("%s:%d/%s", c.Host, c.Port, c.Database)
	id, err := idem.DatabaseID(ctx, pool)
	if err != nil {
		return "", legacy, err
	}
	return legacy + identitySep + id, legacy, nil
}

// identitySep joins the address and the identity in an anchor's key.
const identitySep = " database "

// LoadAnchor returns the anchor kept for key; else the one verified last
// among those kept at the same address (legacy), under no identity (kept
// before anchors named it) or under another one; else nil: a first run.
// keptUnder is the key of such an entry of the address: the identity is a
// row of the database, which whoever controls the database can stamp again,
// so a changed identity is no first run: the log is compared with what was
// verified at that address, and a database really dropped and created again
// there has that entry moved aside by its verifier (sayAnchorFile says so).
func LoadAnchor(store audit.AnchorStore, key, legacy string) (kept *audit.KeptAnchor, keptUnder string, err error) {
	if kept, err = store.Load(key); err != nil || kept != nil || legacy == "" {
		return kept, "", err
	}
	return keptUnderAddress(store, legacy)
}

func keptUnderAddress(store audit.AnchorStore, legacy string) (*audit.KeptAnchor, string, error) {
	k, kept, err := store.Latest(func(k string) bool { return k == legacy || strings.HasPrefix(k, legacy+identitySep) })
	return kept, k, err
}

func auditVerifyRun(ctx context.Context, opts *AuditVerifyOptions) error {
	pool, err := opts.f.Pool(ctx)
	if err != nil {
		return err
	}
	store, err := OpenAnchors(opts.AnchorFile)
	if err != nil {
		return err
	}
	key, legacy, err := AnchorKey(ctx, pool)
	if err != nil {
		return err
	}
	kept, keptUnder, err := LoadAnchor(store, key, legacy)
	if err != nil {
		return cmdutil.WithCode(cmdutil.ExitUsage, err)
	}
	r, err := audit.VerifyKept(ctx, pool, kept, opts.Anchors...)
	if err != nil {
		return err
	}
	out := verifyOutput{Report: r, AnchorFile: store.Path, FirstRun: kept == nil}
	if kept != nil {
		prev := kept.Anchor()
		out.KeptBefore, out.KeptAt = &prev, kept.VerifiedAt.Format(time.RFC3339)
	}
	if r.Intact && r.LastID > 0 {
		if _, err := store.Keep(key, audit.Anchor{ID: r.LastID, Hash: r.LastHash}, time.Now()); err != nil {
			return cmdutil.WithCode(cmdutil.ExitUsage, err)
		}
		out.Kept = true
	}
	out.Compared = compared(kept, len(opts.Anchors))
	out.KeptForAddress = keptUnder == legacy
	if keptUnder != "" && keptUnder != legacy {
		out.KeptForIdentity = strings.TrimPrefix(keptUnder, legacy+identitySep)
	}
	if opts.JSON {
		if err := cmdutil.PrintJSONLine(opts.IO.Out, out); err != nil {
			return err
		}
	} else if r.Intact {
		anchor := "(empty log)"
		if r.LastID > 0 {
			anchor = audit.Anchor{ID: r.LastID, Hash: r.LastHash}.String()
		}
		fmt.Fprintf(opts.IO.Out, "audit chain intact: %s rows, %s\nanchor: %s\n", cmdutil.HumanCount(int64(r.Rows)), out.Compared, anchor)
	} else {
		fmt.Fprintf(opts.IO.ErrOut, "%s\n", out.Compared)
	}
	sayAnchorFile(opts, out, key, legacy, keptUnder, kept, r)
	if !r.Intact {
		return cmdutil.WithCode(cmdutil.ExitInvalid, r.Err())
	}
	return nil
}

// compared says what the chain was compared with: the head kept by the
// last intact verify of this database, and the --anchor rows.
func compared(kept *audit.KeptAnchor, given int) string {
	var what []string
	if kept != nil {
		what = append(what, fmt.Sprintf("row %d as verified on %s", kept.ID, kept.VerifiedAt.Format(time.RFC3339)))
	}
	if given > 0 {
		what = append(what, fmt.Sprintf("%d row(s) given with --anchor", given))
	}
	if len(what) == 0 {
		return "compared with no anchor (none kept for this database, none given with --anchor)"
	}
	return "compared with " + strings.Join(what, " and ")
}

// sayAnchorFile says on stderr what became of the anchor file's entry.
func sayAnchorFile(opts *AuditVerifyOptions, out verifyOutput, key, legacy, keptUnder string, kept *audit.KeptAnchor, r audit.Report) {
	w, path := opts.IO.ErrOut, out.AnchorFile
	switch {
	case out.FirstRun && out.Kept:
		fmt.Fprintf(w, "first run for %s: no anchor was kept for this database in %s; row %d kept now\n", key, path, r.LastID)
	case out.FirstRun:
		fmt.Fprintf(w, "first run for %s: no anchor was kept for this database in %s\n", key, path)
	case out.Kept:
		fmt.Fprintf(w, "row %d kept in %s, for %s\n", r.LastID, path, key)
	default:
		fmt.Fprintf(w, "the anchor kept in %s (row %d) did not move\n", path, kept.ID)
	}
	switch {
	case out.KeptForAddress:
		fmt.Fprintf(w, "the anchor compared with was kept for %s before anchors named the database's identity\n", legacy)
	case out.KeptForIdentity != "":
		fmt.Fprintf(w, "the anchor compared with was kept for %s when the database there said its identity was %s (idem.database_identity was stamped again since)\n",
			legacy, out.KeptForIdentity)
	default:
		return
	}
	if !r.Intact {
		fmt.Fprintf(w, "if the database at %s was dropped and created again since, that anchor is another database's: move its entry %q aside in %s and verify again\n", legacy, keptUnder, path)
	}
}

// verifyOutput is audit verify's JSON line: the report and the anchor file.
type verifyOutput struct {
	audit.Report
	AnchorFile string        `json:"anchor_file"`
	FirstRun   bool          `json:"first_run"`
	KeptBefore *audit.Anchor `json:"kept_before,omitempty"`
	KeptAt     string        `json:"kept_before_verified_at,omitempty"`
	// KeptForAddress: the kept anchor was found under the database's
	// address alone (kept before anchors named its identity).
	KeptForAddress bool `json:"kept_for_address,omitempty"`
	// KeptForIdentity: the kept anchor was found under the database's
	// address and another identity (the one it said then).
	KeptForIdentity string `json:"kept_for_identity,omitempty"`
	// Compared says what the chain was compared with.
	Compared string `json:"compared"`
	Kept     bool   `json:"kept"`
}
