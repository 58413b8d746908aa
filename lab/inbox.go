package lab

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
)

// Identities an inbox design keys its rows on: the statements claim, read and
// save_response take these first, then the hash (claim) or the response.
func businessIdentity(d delivery) []any  { return []any{d.Tenant, d.OperationID} }
func operationIDOnly(d delivery) []any   { return []any{d.OperationID} }
func transportPosition(d delivery) []any { return []any{d.Topic, d.Partition, d.Offset} }

// Payload fingerprints an inbox design stores and compares.
func canonicalHash(d delivery) string { return d.Hash }

// rawTextHash hashes the request body as it came, not its canonical form.
func rawTextHash(d delivery) string {
	sum := sha256.Sum256([]byte(d.Raw))
	return "raw-sha256:" + hex.EncodeToString(sum[:])
}

// deliverInbox is an inbox in the same transaction as the effect: claim the
// row, or answer from it; then effect, saved response, COMMIT. Atomic; what
// it keys on (id) and compares (hash) are what a design gets right or wrong.
func deliverInbox(id func(delivery) []any, hash func(delivery) string) func(context.Context, *session, delivery) (Reply, error) {
	return func(ctx context.Context, s *session, d delivery) (Reply, error) {
		key, h := id(d), hash(d)
		if err := s.beginAt(ctx); err != nil {
			return Reply{}, err
		}
		tag, err := s.exec(ctx, "claim", append(key[:len(key):len(key)], h)...)
		if err != nil {
			return Reply{}, err
		}
		if err := s.step(ctx, StepAfterMarker); err != nil {
			return Reply{}, err
		}
		if tag.RowsAffected() == 0 {
			return s.answerFromRow(ctx, "read", key, h)
		}
		return s.effectSaveCommit(ctx, d, key)
	}
}

// deliverUUIDPerRetry is the atomic executor called by a client that mints a
// new idempotency key for every send and hands it over as the operation id.
func deliverUUIDPerRetry(ctx context.Context, s *session, d delivery) (Reply, error) {
	d.OperationID = d.Key
	return deliverAtomic(ctx, s, d)
}

// deliverRevisionAsDuplicate is the atomic executor called by a producer that
// sends a settlement revision under the key of the settlement it corrects.
func deliverRevisionAsDuplicate(ctx context.Context, s *session, d delivery) (Reply, error) {
	if d.RevisionOf != "" {
		d.OperationID = d.RevisionOf
	}
	return deliverAtomic(ctx, s, d)
}
