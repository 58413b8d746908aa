package recovery

import (
	"context"
	_ "embed"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/idemctl/idemctl/idem"
)

// One identity's story is read in parts, each one statement over tables
// that live together (on Citus, the tenant's co-located rows; the
// coordinator's tables), merged here.
var (
	//go:embed sql/history_inbox.sql
	historyInboxSQL string
	//go:embed sql/history_local.sql
	historyLocalSQL string
	//go:embed sql/history_purge.sql
	historyPurgeSQL string
)

// historyPlanKindSQL is the kind of an entry plan (record, import).
const historyPlanKindSQL = "SELECT kind FROM idem.entry_plan WHERE id = $1"

// enteredAs names how an identity entered under an entry plan (the first
// event, ord 1, its target the plan) by the plan's kind: the body's
// transport, which history_inbox.sql reads, says it too, but a purge
// removes it with the body.
func enteredAs(ctx context.Context, db idem.DBTX, e *Event, ord int, target string) error {
	plan, ok := strings.CutPrefix(target, "entry_plan:")
	if ord != 1 || !ok {
		return nil
	}
	id, err := strconv.ParseInt(plan, 10, 64)
	if err != nil {
		return nil
	}
	var kind string
	if err := db.QueryRow(ctx, historyPlanKindSQL, id).Scan(&kind); err != nil {
		return fmt.Errorf("entry plan %d: %w", id, err)
	}
	if kind == "import" {
		e.Event = "imported"
	} else {
		e.Event = "recorded by hand"
	}
	return nil
}

// historyAuditSQL finds the audit row of an event recorded by target.
const historyAuditSQL = "SELECT min(id) FROM idem.audit WHERE target = $1 AND action = $2"

// Event is one thing known about an identity, at one time of the database
// clock, with the audit row that records it when one does.
type Event struct {
	At      time.Time `json:"at"`
	Event   string    `json:"event"`
	Detail  string    `json:"detail"`
	AuditID *int64    `json:"audit_id"`
}

// History returns everything known about one identity, oldest first:
// applied, conflicts and their decisions, manual corrections, the purge of
// its body. Empty when the database knows nothing of it.
func History(ctx context.Context, db idem.DBTX, id idem.Identity) ([]Event, error) {
	type row struct {
		Event
		ord            int
		target, action *string
	}
	var all []row
	for _, q := range []string{historyInboxSQL, historyLocalSQL, historyPurgeSQL} {
		rows, err := db.Query(ctx, q, id.TenantID, id.OperationID)
		if err != nil {
			return nil, fmt.Errorf("history of %s: %w", id, err)
		}
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.At, &r.ord, &r.Event.Event, &r.Detail, &r.AuditID, &r.target, &r.action); err != nil {
				rows.Close()
				return nil, fmt.Errorf("history of %s: %w", id, err)
			}
			all = append(all, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("history of %s: %w", id, err)
		}
	}
	for i := range all {
		if all[i].target == nil {
			continue
		}
		if err := enteredAs(ctx, db, &all[i].Event, all[i].ord, *all[i].target); err != nil {
			return nil, fmt.Errorf("history of %s: %w", id, err)
		}
		if err := db.QueryRow(ctx, historyAuditSQL, *all[i].target, *all[i].action).Scan(&all[i].AuditID); err != nil {
			return nil, fmt.Errorf("history of %s: audit of %s: %w", id, *all[i].target, err)
		}
	}
	sort.SliceStable(all, func(i, j int) bool {
		if !all[i].At.Equal(all[j].At) {
			return all[i].At.Before(all[j].At)
		}
		return all[i].ord < all[j].ord
	})
	out := make([]Event, len(all))
	for i, r := range all {
		out[i] = r.Event
	}
	return out, nil
}
