-- 012_import: adopting an existing idempotency store (idemctl import) as an
-- entry plan of kind 'import'.
--
-- An import can hold a million rows: its planner fills it in batches
-- (idem.import_plan_add) while it is 'staging', then seals it with the
-- source's digest and counts (idem.import_plan_seal), which makes it
-- 'planned'; only a planned plan is approved, so the approver approves
-- exactly the items that were sealed. Each item keeps its original
-- created_at (the body lands in the partition of its real age). An item of a
-- store that kept only its own request hash has no payload: store_hash is
-- that hash and hash_function the store's function, NULL when the importer
-- did not declare it (then no retry can ever match it).
ALTER TABLE idem.entry_plan DROP CONSTRAINT entry_plan_state_check;
ALTER TABLE idem.entry_plan ADD CONSTRAINT entry_plan_state_check
    CHECK (state IN ('staging', 'planned', 'approved', 'running', 'done', 'aborted'));
ALTER TABLE idem.entry_plan DROP CONSTRAINT entry_plan_items_check;
ALTER TABLE idem.entry_plan ADD CONSTRAINT entry_plan_items_check CHECK (items >= 1 OR state IN ('staging', 'aborted'));
ALTER TABLE idem.entry_plan DROP CONSTRAINT entry_state_complete;
ALTER TABLE idem.entry_plan ADD CONSTRAINT entry_state_complete CHECK (CASE state
    WHEN 'staging' THEN kind = 'import' AND approved_at IS NULL AND started_at IS NULL AND finished_at IS NULL AND aborted_at IS NULL
    WHEN 'planned' THEN approved_at IS NULL AND started_at IS NULL AND finished_at IS NULL AND aborted_at IS NULL
    WHEN 'approved' THEN approved_person IS NOT NULL AND started_at IS NULL AND finished_at IS NULL AND aborted_at IS NULL
    WHEN 'running' THEN approved_person IS NOT NULL AND started_at IS NOT NULL AND finished_at IS NULL AND aborted_at IS NULL
    WHEN 'done' THEN approved_person IS NOT NULL AND started_at IS NOT NULL AND finished_at IS NOT NULL AND aborted_at IS NULL
    ELSE aborted_at IS NOT NULL AND abort_reason IS NOT NULL AND finished_at IS NULL
    END);
-- cursor: the last (created_at, tenant_id, operation_id) the import read,
-- for the next one's --since; hash_function: what a hash-only store's
-- hashes were declared to be.
ALTER TABLE idem.entry_plan
    ADD COLUMN cursor        text CHECK (cursor IS NULL OR octet_length(cursor) <= 1024),
    ADD COLUMN hash_function text CHECK (hash_function IN ('sha256-raw', 'sha256-sorted-json'));

ALTER TABLE idem.entry_item
    ADD COLUMN created_at    timestamptz,
    ADD COLUMN store_hash    bytea CHECK (store_hash IS NULL OR octet_length(store_hash) = 32),
    ADD COLUMN hash_function text CHECK (hash_function IN ('sha256-raw', 'sha256-sorted-json')),
    ALTER COLUMN payload DROP NOT NULL,
    ALTER COLUMN payload_hash DROP NOT NULL,
    ADD CONSTRAINT entry_item_payload_or_store_hash CHECK (
        (payload IS NOT NULL AND payload_hash IS NOT NULL AND store_hash IS NULL AND hash_function IS NULL)
        OR (payload IS NULL AND payload_hash IS NULL AND store_hash IS NOT NULL));
ALTER TABLE idem.entry_item DROP CONSTRAINT entry_item_outcome_check;
ALTER TABLE idem.entry_item ADD CONSTRAINT entry_item_outcome_check
    CHECK (outcome IN ('entered', 'exists', 'refused', 'skipped', 'quarantined'));

-- imported_hash: the identities an import entered from a store that kept
-- only its own request hash (no payload). The identity's payload_digest is
-- that hash when its function was declared (a request whose payload bytes
-- hash to it is the same request), else a digest no payload text can have;
-- idem.record_conflict says "imported without its payload" for either.
CREATE TABLE idem.imported_hash (
    tenant_id     text NOT NULL,
    operation_id  text NOT NULL,
    store_hash    bytea NOT NULL CHECK (octet_length(store_hash) = 32),
    hash_function text CHECK (hash_function IN ('sha256-raw', 'sha256-sorted-json')),
    entry_plan    bigint NOT NULL,
    PRIMARY KEY (tenant_id, operation_id)
);

