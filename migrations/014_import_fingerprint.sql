-- 014_import_fingerprint: an import plan keeps, for each item, a fingerprint
-- of what will enter instead of its payload and response. The run reads the
-- source again, stages its rows in a temporary table of the schema owner's
-- (idem.import_stage_open) and enters them only if they are exactly the
-- planned items (idem.import_run): the rows are written once, by the run.
--
-- fingerprint: sha256 of the item's tenant, operation id, payload hash (or
-- the store's own hash), response text and created_at
-- (idem.import_fingerprint). An item with a fingerprint keeps neither
-- payload nor response. Plans of kind 'record' keep their items whole.
ALTER TABLE idem.entry_item
    ADD COLUMN fingerprint bytea CHECK (fingerprint IS NULL OR octet_length(fingerprint) = 32),
    ALTER COLUMN response DROP NOT NULL,
    DROP CONSTRAINT entry_item_payload_or_store_hash,
    ADD CONSTRAINT entry_item_payload_or_store_hash CHECK (
        (payload IS NOT NULL AND payload_hash IS NOT NULL AND store_hash IS NULL AND hash_function IS NULL
         AND response IS NOT NULL AND fingerprint IS NULL)
        OR (payload IS NULL AND payload_hash IS NULL AND store_hash IS NOT NULL AND response IS NOT NULL AND fingerprint IS NULL)
        OR (payload IS NULL AND payload_hash IS NULL AND response IS NULL AND fingerprint IS NOT NULL));
