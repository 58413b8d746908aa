package recovery

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/idemctl/idemctl/idem"
)

//go:embed sql/history.sql
var historySQL string

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
	rows, err := db.Query(ctx, historySQL, id.TenantID, id.OperationID)
	if err != nil {
		return nil, fmt.Errorf("history of %s: %w", id, err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var e Event
		if err := rows.Scan(&e.At, &e.Event, &e.Detail, &e.AuditID); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}
