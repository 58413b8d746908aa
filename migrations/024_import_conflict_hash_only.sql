-- 024_import_conflict_hash_only: a row of a hash-only store (request_hash,
-- no payload) for an identity the inbox holds with another request is its
-- own outcome, conflict_hash_only: it did not enter, the inbox's side is
-- kept, and the plan's item row (its store hash, created_at, evidence and
-- fingerprint) is the evidence of the other side. It was written
-- 'refused', which means a pending claim or an open quarantine record. A
-- quarantine record needs the incoming payload (its hash is checked, and
-- accept-as-new runs it), which such a row does not have.
ALTER TABLE idem.entry_item
    DROP CONSTRAINT entry_item_outcome_check,
    ADD CONSTRAINT entry_item_outcome_check
        CHECK (outcome IN ('entered', 'exists', 'refused', 'skipped', 'quarantined', 'conflict_hash_only'));
