-- object: function idem.import_plan_for_planner(bigint, text, text)
-- import_plan_for_planner locks import plan p_id for its planner's next
-- step (p_step: 'filled', 'staged', 'sealed'): it must be an import plan
-- still staging (IX341), and the caller its planner, the same person
-- (p_person, from idem.require_person) on the same login (IX343). The one
-- guard of every function that fills, stages or seals an import plan.
-- Internal: granted to nobody. Returns the plan.
CREATE OR REPLACE FUNCTION idem.import_plan_for_planner(p_id bigint, p_person text, p_step text)
RETURNS idem.entry_plan
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_p idem.entry_plan := idem.entry_plan_lock(p_id);
BEGIN
    IF v_p.kind <> 'import' OR v_p.state <> 'staging' THEN
        RAISE EXCEPTION 'entry plan % is % (%): only a staging import plan is %', p_id, v_p.state, v_p.kind, p_step
            USING ERRCODE = 'IX341';
    END IF;
    IF p_person <> v_p.planned_person OR session_user <> v_p.planned_db_user THEN
        RAISE EXCEPTION 'import plan % is % by its planner only', p_id, p_step USING ERRCODE = 'IX343';
    END IF;
    RETURN v_p;
END
$$;
