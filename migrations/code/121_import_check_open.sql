-- object: function idem.import_check_open(bigint)
-- grant: operator
-- import_check_open makes the table an import plan's approver copies the
-- rows they read again from the plan's source into, before approving it
-- (idem.import_plan_approve compares them with the plan):
-- pg_temp.idem_import_check, a temporary table of the caller's session
-- that lives until the end of the transaction, owned by the schema owner;
-- the caller's login may only INSERT (COPY) into it, so it can neither give
-- it triggers, policies or rules nor swap it for a view. Its columns are
-- the run's stage's (idem.import_stage_open) but the payload: its hash
-- stands for it (the seal checked that each staged payload hashes to its
-- payload_hash, so equal hashes mean equal canonical text; the text would
-- be a third of what the approver copies); n numbers the rows in the
-- order they were copied. The table names its plan (its comment, which
-- only the schema owner can change): the approval refuses another plan's.
-- The plan is checked, and locked, by idem.import_plan_ready(p_id,
-- 'approve'): an import plan (a record plan: IX341, naming idemctl record
-- approve), planned (IX341), of another person than the caller (IX342),
-- who is a person (IX313). Returns the plan.
CREATE OR REPLACE FUNCTION idem.import_check_open(p_id bigint)
RETURNS idem.entry_plan
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_p idem.entry_plan := idem.import_plan_ready(p_id, 'approve');
BEGIN
    CREATE TEMPORARY TABLE idem_import_check (
        tenant_id    text,
        operation_id text,
        payload_hash text,
        response     text,
        created_at   timestamptz,
        store_hash   text,
        evidence     text,
        n            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY
    ) ON COMMIT DROP;
    EXECUTE format('COMMENT ON TABLE pg_temp.idem_import_check IS %L', 'check of import plan ' || p_id);
    EXECUTE format('GRANT INSERT ON pg_temp.idem_import_check TO %I', session_user);
    RETURN v_p;
END
$$;
