// Package inspect holds `idemctl inspect`: what the database knows of one
// identity (its inbox record, tombstone and history).
package inspect

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/governance"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/quarantine"
	"github.com/idemctl/idemctl/recovery"
)

// InspectOptions are the flags of `idemctl inspect`.
type InspectOptions struct {
	IO       *cmdutil.IOStreams
	JSON     bool
	Identity idem.Identity
	// History shows the identity's whole story instead of its record.
	History bool
	f       *cmdutil.Factory
}

// NewCmdInspect builds `idemctl inspect`.
func NewCmdInspect(f *cmdutil.Factory, runF func(*InspectOptions) error) *cobra.Command {
	opts := &InspectOptions{IO: f.IO, f: f}
	cmd := &cobra.Command{
		Use:   "inspect --tenant T --op OP",
		Short: "Show the inbox record of one identity (read-only)",
		Long: `Show what the inbox holds for one identity: class, payload hash, created_at
(database clock), canonical payload, saved response, transport metadata, and
the ids of conflict records for it. Nothing is written.

A purged identity shows its tombstone (hash, class, the purge plan and when,
and its origin: executed, or imported / recorded by hand under an entry
plan; no payload, no response).

--history shows everything known about the identity in time order, each
with its audit row when one records it: applied (with its transport),
conflicts (quarantine ids, occurrences) and their decisions, manual
corrections, the purge of its body. Resolve runs are recorded per run
(audit actions resolve.start and resolve.run), not per identity.

Exit code 7 when the identity has neither; 4 on a
standby (a lagging replica could say "not found" about an operation that
happened).`,
		Example: `  idemctl inspect --tenant acme --op charge-42
  idemctl inspect --tenant acme --op charge-42 -o json | jq .response
  # the evidence to hand over in a dispute: everything known, in time order
  idemctl inspect --tenant acme --op charge-42 --history`,
		Args: cmdutil.MaxArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.Identity.Validate(); err != nil {
				return cmdutil.WithCode(cmdutil.ExitUsage, err)
			}
			opts.JSON = f.JSON()
			if runF != nil {
				return runF(opts)
			}
			return inspectRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Identity.TenantID, "tenant", "", "tenant_id of the operation (required)")
	cmd.Flags().StringVar(&opts.Identity.OperationID, "op", "", "operation_id of the operation (required)")
	cmd.Flags().BoolVar(&opts.History, "history", false, "everything known about the identity, in time order, with audit references")
	return cmd
}

func inspectRun(ctx context.Context, opts *InspectOptions) error {
	pool, err := opts.f.Pool(ctx)
	if err != nil {
		return err
	}
	// Step 1 of the protocol holds here too: a lagging standby would say "no
	// inbox record" about an operation that did happen.
	if _, err := recovery.CheckPrimary(ctx, pool); err != nil {
		var np *recovery.NotPrimaryError
		if errors.As(err, &np) && np.InRecovery {
			return cmdutil.WithCode(cmdutil.ExitNotPrimary, err)
		}
		if !errors.As(err, &np) {
			return err
		}
	}
	if opts.History {
		return inspectHistory(ctx, opts, pool)
	}
	rec, err := recovery.ReadInboxRecord(ctx, pool, opts.Identity)
	if errors.Is(err, recovery.ErrNoRecord) {
		return inspectTombstone(ctx, opts, pool)
	}
	if err != nil {
		return err
	}
	origin, err := governance.Origin(ctx, pool, opts.Identity.TenantID, opts.Identity.OperationID)
	if err != nil {
		return err
	}
	if opts.JSON {
		return cmdutil.PrintJSONLine(opts.IO.Out, struct {
			recovery.InboxRecord
			Origin string `json:"origin"`
		}{rec, origin})
	}
	conflicts := "none"
	if len(rec.Conflicts) > 0 {
		ids := make([]string, len(rec.Conflicts))
		for i, q := range rec.Conflicts {
			ids[i] = fmt.Sprintf("#%d", q)
		}
		conflicts = strings.Join(ids, ", ")
	}
	rows := [][]string{
		{"tenant", rec.Tenant},
		{"operation_id", rec.OperationID},
		{"class", rec.Class},
		{"hash", rec.Hash},
		{"created_at", rec.CreatedAt.UTC().Format(time.RFC3339Nano)},
		{"payload", string(rec.Payload)},
		{"response", string(rec.Response)},
		{"transport", cmdutil.OrDash(string(rec.Transport))},
		{"quarantine ids", conflicts},
		{"origin", origin},
	}
	return cmdutil.PrintTable(opts.IO.Out, []string{"field", "value"}, rows)
}

// inspectTombstone shows what remains of a purged identity: its tombstone (no
// payload, no response). Exit 7 when there is none either.
func inspectTombstone(ctx context.Context, opts *InspectOptions, db idem.DBTX) error {
	id := opts.Identity
	rec, err := recovery.ReadTombstone(ctx, db, id)
	if errors.Is(err, recovery.ErrNoRecord) {
		msg := fmt.Sprintf("tenant %q operation %q has neither an inbox record nor a tombstone", id.TenantID, id.OperationID)
		if ids, qerr := quarantine.ProviderRecords(ctx, db, id); qerr == nil && len(ids) > 0 {
			msg += fmt.Sprintf("; the provider refused this key as used there with another payload: quarantine record #%d (idemctl quarantine show %d)",
				ids[len(ids)-1], ids[len(ids)-1])
		}
		return fmt.Errorf("%w: %s", cmdutil.ErrIdentityNotFound, msg)
	}
	if err != nil {
		return fmt.Errorf("inspect %s: %w", id, err)
	}
	// An identity an entry plan entered without its effect says so, and
	// names its plan, after its body's purge too.
	origin, err := governance.Origin(ctx, db, id.TenantID, id.OperationID)
	if err != nil {
		return fmt.Errorf("inspect %s: %w", id, err)
	}
	if opts.JSON {
		return cmdutil.PrintJSONLine(opts.IO.Out, struct {
			recovery.Tombstone
			Origin string `json:"origin"`
		}{rec, origin})
	}
	rows := [][]string{
		{"tenant", rec.Tenant},
		{"operation_id", rec.OperationID},
		{"class", rec.Class},
		{"hash", rec.Hash},
		{"created_at", rec.CreatedAt.UTC().Format(time.RFC3339Nano)},
		{"state", "purged (tombstone: payload and response are no longer kept)"},
		{"purge plan", fmt.Sprint(rec.PurgePlan)},
		{"purged_at", rec.PurgedAt.UTC().Format(time.RFC3339Nano)},
		{"origin", origin},
	}
	return cmdutil.PrintTable(opts.IO.Out, []string{"field", "value"}, rows)
}

// inspectHistory prints the identity's story, oldest first.
func inspectHistory(ctx context.Context, opts *InspectOptions, db idem.DBTX) error {
	events, err := recovery.History(ctx, db, opts.Identity)
	if err != nil {
		return err
	}
	if len(events) == 0 {
		return fmt.Errorf("%w: the database knows nothing of tenant %q operation %q", cmdutil.ErrIdentityNotFound,
			opts.Identity.TenantID, opts.Identity.OperationID)
	}
	rows := make([][]string, 0, len(events))
	for _, e := range events {
		if opts.JSON {
			if err := cmdutil.PrintJSONLine(opts.IO.Out, e); err != nil {
				return err
			}
			continue
		}
		ref := "-"
		if e.AuditID != nil {
			ref = fmt.Sprintf("audit %d", *e.AuditID)
		}
		rows = append(rows, []string{cmdutil.FormatStamp(e.At), e.Event, e.Detail, ref})
	}
	if opts.JSON {
		return nil
	}
	return cmdutil.PrintTable(opts.IO.Out, []string{"at", "event", "detail", "record"}, rows)
}
