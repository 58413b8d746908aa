-- object: function idem.quarantine_import_refusal(jsonb)
-- quarantine_import_refusal says why a record (its incoming transport,
-- p_transport: not the row, whose type a Citus shard does not know) may not
-- be accepted as a new operation when its incoming side came from an import (idem.import_run,
-- idem.import_run_chunk: entered_by import, with the plan and the old
-- store's answer in its transport), NULL otherwise. The old store finished
-- that operation (an import takes only finished rows with a response):
-- running its payload again under a new id would repeat it, a second
-- charge. The record is to be rejected; an operation that really is new is
-- recorded by hand (idemctl record). Internal: called by
-- quarantine_accept_as_new, quarantine_accept_record and
-- quarantine_bulk_accept_plan, which raise IX128 with it.
CREATE OR REPLACE FUNCTION idem.quarantine_import_refusal(p_transport jsonb)
RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
    SELECT format('its incoming side was imported from an old store that finished it (entry plan %s; its answer is in the record): accepting it as new would run it a second time',
                  coalesce(p_transport ->> 'entry_plan', '?'))
    WHERE p_transport ->> 'entered_by' = 'import'
$$;
