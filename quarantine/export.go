package quarantine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemctl/idemctl/audit"
	"github.com/idemctl/idemctl/idem"
)

// BundleFormat names the export format so that a reader can tell versions apart.
const BundleFormat = "idemctl.quarantine.evidence/v1"

// Bundle is a self-contained evidence bundle for a ticket: the record, its
// diff, both canonical payloads with their hashes (recomputed at export time),
// how to verify them, and the audit row that recorded the export.
type Bundle struct {
	Format string `json:"format"`
	// ExportedAt is the database clock at export (the audit row's time).
	ExportedAt     time.Time `json:"exported_at"`
	ExportedBy     string    `json:"exported_by"`
	ExportedDBUser string    `json:"exported_db_user"`
	Record         Record    `json:"record"`
	// Diff repeats Record.Diff at the top, for a reader who jumps to it.
	Diff     []Change        `json:"diff"`
	Stored   PayloadEvidence `json:"stored"`
	Incoming PayloadEvidence `json:"incoming"`
	// Verified is true when both recomputed hashes equal the recorded ones.
	Verified     bool     `json:"verified"`
	Instructions []string `json:"instructions"`
	Audit        AuditRef `json:"audit"`
}

// PayloadEvidence is one side of the conflict, ready to be checked by anyone.
type PayloadEvidence struct {
	// Hash is the hash recorded at conflict time (jcs-sha256:<hex>).
	Hash string `json:"hash"`
	// CanonicalPayload is the exact RFC 8785 canonical text of the payload,
	// as a JSON string: its UTF-8 bytes are what Hash is the SHA-256 of.
	CanonicalPayload string `json:"canonical_payload"`
	// RecomputedHash is the hash of CanonicalPayload computed at export.
	RecomputedHash string `json:"recomputed_hash"`
	// HashVerified is RecomputedHash == Hash.
	HashVerified bool `json:"hash_verified"`
	// Problem says why the hash could not be verified, if it could not.
	Problem string `json:"problem,omitempty"`
}

// AuditRef is the audit row recording the export; `idemctl audit verify
// --anchor ID:HASH` later proves the log still holds it.
type AuditRef struct {
	ID   int64  `json:"id"`
	Hash string `json:"hash"`
}

// Export builds the evidence bundle of one record and records the export in
// the audit log, in one transaction. The stored payloads are the exact
// canonical texts that were hashed: their hashes are recomputed here and
// checked against the recorded ones; a mismatch is reported in the bundle
// (Verified false), not hidden.
func Export(ctx context.Context, db idem.TxBeginner, id int64, operator string) (Bundle, error) {
	var b Bundle
	err := inTx(ctx, db, func(tx pgx.Tx) error {
		rec, err := Show(ctx, tx, id)
		if err != nil {
			return err
		}
		b = Bundle{
			Format:   BundleFormat,
			Record:   rec,
			Diff:     rec.Diff,
			Stored:   evidence(rec.StoredPayload, rec.StoredHash),
			Incoming: evidence(rec.IncomingPayload, rec.IncomingHash),
		}
		if rec.StoredSide == StoredProvider {
			b.Stored = PayloadEvidence{Problem: "nothing here holds this identity: the other side is the provider's answer " +
				"(record.stored_response: status, body, where it was sent), the key used there with another payload"}
		}
		b.Verified = (b.Stored.HashVerified || rec.StoredPayload == nil) && b.Incoming.HashVerified
		b.Instructions = instructions(rec)
		row, err := audit.Append(ctx, tx, audit.Entry{
			Actor:  operator,
			Action: ActionExport,
			Target: fmt.Sprintf("quarantine:%d", rec.ID),
			Details: map[string]any{
				"quarantine_id": rec.ID, "tenant_id": rec.Tenant, "operation_id": rec.OperationID,
				"status": rec.Status, "stored_hash": rec.StoredHash, "incoming_hash": rec.IncomingHash,
				"verified": b.Verified,
			},
		})
		if err != nil {
			return err
		}
		b.ExportedAt, b.ExportedBy, b.ExportedDBUser = row.At, row.Actor, row.DBUser
		b.Audit = AuditRef{ID: row.ID, Hash: row.Hash}
		return nil
	})
	if err != nil {
		return Bundle{}, fmt.Errorf("export quarantine %d: %w", id, err)
	}
	return b, nil
}

// evidence checks one side's stored canonical text against its recorded hash.
// A purged stored side (nil) has only its hash left.
func evidence(payload []byte, hash string) PayloadEvidence {
	e := PayloadEvidence{Hash: hash}
	if payload == nil {
		e.Problem = "the payload was purged under a proven replay horizon: only its hash remains"
		return e
	}
	sum := sha256.Sum256(payload)
	e.CanonicalPayload, e.RecomputedHash = string(payload), idem.HashPrefix+hex.EncodeToString(sum[:])
	e.HashVerified = e.RecomputedHash == hash
	if !e.HashVerified {
		e.Problem = "the recomputed hash differs from the recorded one: the payload was not hashed from this content"
	}
	return e
}

func instructions(rec Record) []string {
	stored := "stored is the payload the identity was first executed with; incoming is the conflicting retry, which did not run."
	if rec.StoredSide == StoredProvider {
		stored = "stored is empty: the provider answered that the key was used there with another payload, and nothing here holds the identity; " +
			"record.stored_response is the provider's answer (status, body); incoming is the payload sent."
	}
	return []string{
		fmt.Sprintf("Quarantine record %d: tenant %q, operation %q, class %s, status %s, seen %d time(s).",
			rec.ID, rec.Tenant, rec.OperationID, rec.Class, rec.Status, rec.Occurrences),
		stored,
		"Each canonical_payload is the exact RFC 8785 (JCS) canonical text; hash is jcs-sha256: followed by the hex SHA-256 of its UTF-8 bytes.",
		"Verify: jq -j .stored.canonical_payload BUNDLE.json | sha256sum   (and .incoming); compare with the hex after jcs-sha256: in .stored.hash.",
		"Or: jq -j .incoming.canonical_payload BUNDLE.json | idemctl hash   prints the full jcs-sha256:<hex>.",
		"diff lists every differing value: path is an RFC 6901 JSON Pointer; change is added, removed, type_changed or changed; the absent side of added/removed is null.",
		"audit is the audit row that recorded this export: idemctl audit verify --anchor ID:HASH proves the log still holds it unchanged.",
	}
}
