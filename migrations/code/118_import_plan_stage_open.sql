-- object: function idem.import_plan_stage_open(bigint)
-- grant: operator
-- import_plan_stage_open makes the stage of a staging import plan, by its
-- planner only (the same person and login, IX343), off Citus (IX343: there
-- a plan keeps an item a row, idem.import_plan_add): an unlogged table of
-- the schema owner's, idem.import_stage_<plan id>, into which the planner's
-- login may only INSERT (COPY) the canonical rows, in the order it read
-- them (n numbers them). The grant lives only until the seal
-- (idem.import_plan_seal_stage takes it back and checks every row); with
-- INSERT alone the login can neither read, change nor delete a row, nor
-- give the table triggers, rules or policies. idemctl opens, fills and
-- seals the stage in the plan's one transaction, so no other session ever
-- sees the grant. Unlogged: a crash of the database empties it, and a run
-- then refuses the plan (plan again). Returns the stage's name.
CREATE OR REPLACE FUNCTION idem.import_plan_stage_open(p_id bigint)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_person text := idem.require_person('stage an import plan');
    v_p      idem.entry_plan := idem.import_plan_for_planner(p_id, v_person, 'staged');
    v_t      text := format('idem.%I', 'import_stage_' || p_id);
BEGIN
    IF idem.citus_distributed() THEN
        RAISE EXCEPTION 'import plan %: on Citus an import plan keeps an item a row (idem.import_plan_add)', p_id
            USING ERRCODE = 'IX343';
    END IF;
    IF to_regclass(v_t) IS NOT NULL OR EXISTS (SELECT 1 FROM idem.entry_item e WHERE e.plan_id = p_id) THEN
        RAISE EXCEPTION 'import plan % is staged already, or holds item rows', p_id USING ERRCODE = 'IX343';
    END IF;
    EXECUTE format('CREATE UNLOGGED TABLE %s (
        n            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        tenant_id    text,
        operation_id text,
        payload      text,
        payload_hash text,
        response     jsonb,
        created_at   timestamptz,
        store_hash   text,
        evidence     text
    ) WITH (autovacuum_enabled = off)', v_t);
    EXECUTE format('REVOKE ALL ON %s FROM PUBLIC', v_t);
    EXECUTE format('GRANT INSERT ON %s TO %I', v_t, session_user);
    RETURN v_t;
END
$$;
