-- 015_import_items_digest: an import plan may keep, instead of one row an
-- item, one digest of all its items in the order its planner read them
-- (items_digest: idem.import_plan_seal_digest). The run recomputes it over
-- the rows it read again and staged (idem.import_run_digest) and enters
-- them only if it is the planned one. entry_item then holds only the items
-- the run did not enter, with their outcome (refused, skipped,
-- quarantined). Plans without it keep an item a row (on Citus, and plans
-- sealed before).
ALTER TABLE idem.entry_plan
    ADD COLUMN items_digest bytea CHECK (items_digest IS NULL OR (kind = 'import' AND octet_length(items_digest) = 32));
