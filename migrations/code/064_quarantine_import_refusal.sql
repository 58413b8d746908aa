-- object: function idem.quarantine_import_refusal(jsonb)
-- quarantine_import_refusal says why a record (its incoming transport,
-- p_transport: not the row, whose type a Citus shard does not know) may not
-- be accepted as a new operation when its incoming side came from an import (idem.import_run,
-- idem.import_run_chunk: entered_by import) or a record of an outcome known
-- from outside (idem.entry_plan_run: entered_by record), each with the plan
-- and the answer in its transport, NULL otherwise. That operation is done
-- (an import takes only finished rows with a response; a record says it
-- happened): running its payload again under a new id would repeat it, a
-- second charge. The record is to be rejected; an operation that really is new is
-- recorded by hand (idemctl record). Internal: called by
-- quarantine_accept_as_new, quarantine_accept_record and
-- quarantine_bulk_accept_plan, which raise IX128 with it.
CREATE OR REPLACE FUNCTION idem.quarantine_import_refusal(p_transport jsonb)
RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
    SELECT format('its incoming side %s (entry plan %s; its answer is in the record): accepting it as new would run it a second time',
                  CASE p_transport ->> 'entered_by' WHEN 'import' THEN 'was imported from an old store that finished it'
                       ELSE 'was recorded by hand as done (an outcome known from outside)' END,
                  coalesce(p_transport ->> 'entry_plan', '?'))
    WHERE p_transport ->> 'entered_by' IN ('import', 'record')
$$;
