package recovery

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemctl/idemctl/idem"
)

var (
	//go:embed sql/inbox_record.sql
	inboxRecordSQL string
	//go:embed sql/tombstone_record.sql
	tombstoneRecordSQL string
)

// ErrNoRecord: the identity has no inbox record (or no tombstone).
var ErrNoRecord = errors.New("no record for the identity")

// InboxRecord is what the inbox holds for one identity.
type InboxRecord struct {
	Tenant      string          `json:"tenant"`
	OperationID string          `json:"operation_id"`
	Class       string          `json:"class"`
	Hash        string          `json:"hash"`
	CreatedAt   time.Time       `json:"created_at"`
	Payload     json.RawMessage `json:"payload"`
	Response    json.RawMessage `json:"response"`
	Transport   json.RawMessage `json:"transport,omitempty"`
	// Conflicts are the ids of the identity's quarantine records.
	Conflicts []int64 `json:"conflicts"`
}

// Tombstone is what remains of a purged identity: no payload, no response.
type Tombstone struct {
	Tenant      string    `json:"tenant"`
	OperationID string    `json:"operation_id"`
	Class       string    `json:"class"`
	Hash        string    `json:"hash"`
	CreatedAt   time.Time `json:"created_at"`
	Purged      bool      `json:"purged"`
	PurgePlan   int64     `json:"purge_plan"`
	PurgedAt    time.Time `json:"purged_at"`
}

// ReadInboxRecord reads one identity's inbox record; ErrNoRecord when it
// has none (it may have a tombstone: ReadTombstone).
func ReadInboxRecord(ctx context.Context, db idem.DBTX, id idem.Identity) (InboxRecord, error) {
	rec := InboxRecord{Tenant: id.TenantID, OperationID: id.OperationID, Conflicts: []int64{}}
	err := db.QueryRow(ctx, inboxRecordSQL, id.TenantID, id.OperationID).
		Scan(&rec.Class, &rec.Hash, &rec.CreatedAt, &rec.Payload, &rec.Response, &rec.Transport, &rec.Conflicts)
	if errors.Is(err, pgx.ErrNoRows) {
		return rec, ErrNoRecord
	}
	if err != nil {
		return rec, fmt.Errorf("inspect %s: %w", id, err)
	}
	return rec, nil
}

// ReadTombstone reads a purged identity's tombstone; ErrNoRecord when it
// has none.
func ReadTombstone(ctx context.Context, db idem.DBTX, id idem.Identity) (Tombstone, error) {
	t := Tombstone{Tenant: id.TenantID, OperationID: id.OperationID, Purged: true}
	err := db.QueryRow(ctx, tombstoneRecordSQL, id.TenantID, id.OperationID).
		Scan(&t.Class, &t.Hash, &t.CreatedAt, &t.PurgePlan, &t.PurgedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return t, ErrNoRecord
	}
	if err != nil {
		return t, fmt.Errorf("inspect %s: %w", id, err)
	}
	return t, nil
}
