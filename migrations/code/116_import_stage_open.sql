-- object: function idem.import_stage_open(bigint)
-- grant: operator
-- import_stage_open makes the table an approved import plan's run stages
-- its source's rows into: pg_temp.idem_import_stage, a temporary table of
-- the caller's session that lives until the end of the transaction, owned
-- by the schema owner; the caller's login may only INSERT (COPY) into it,
-- so it can neither give it triggers, policies or rules nor swap it for a
-- view. n numbers the rows in the order they were copied (a plan with an
-- items digest is checked in that order), evidence is the item's (its
-- source row). For a plan with an item a row an identity is staged once
-- (the stage's primary key); a plan with an items digest has its run count
-- the identities it enters and leaves alone (idem.import_run_digest): a
-- key the size of a million-row stage, inserted in no order, would not fit
-- the session's temporary buffers. idemctl import run copies the rows it read again into it, then
-- calls idem.entry_plan_run in the same transaction; idem.import_run enters
-- them only if they are exactly the planned items. The plan is checked,
-- and locked, by idem.import_plan_ready(p_id, 'run'): an approved import
-- not staged (IX341), the caller a person (IX313). The stage names
-- its plan (its comment); a run refuses another plan's. Returns the plan.
CREATE OR REPLACE FUNCTION idem.import_stage_open(p_id bigint)
RETURNS idem.entry_plan
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_p idem.entry_plan := idem.import_plan_ready(p_id, 'run');
BEGIN
    IF v_p.staged THEN
        RAISE EXCEPTION 'import plan % is staged: it runs from its stage by chunks (idemctl import run %)', p_id, p_id
            USING ERRCODE = 'IX341';
    END IF;
    CREATE TEMPORARY TABLE idem_import_stage (
        tenant_id    text,
        operation_id text,
        payload      text,
        payload_hash text,
        response     text,
        created_at   timestamptz,
        store_hash   text,
        evidence     text,
        n            bigint GENERATED ALWAYS AS IDENTITY UNIQUE
    ) ON COMMIT DROP;
    IF v_p.items_digest IS NULL THEN
        ALTER TABLE idem_import_stage ADD PRIMARY KEY (tenant_id, operation_id);
    END IF;
    -- The plan it is for, which only its owner (the schema owner) can
    -- change: idem.import_run refuses the stage of another plan.
    EXECUTE format('COMMENT ON TABLE pg_temp.idem_import_stage IS %L', 'stage of import plan ' || p_id);
    EXECUTE format('GRANT INSERT ON pg_temp.idem_import_stage TO %I', session_user);
    RETURN v_p;
END
$$;
