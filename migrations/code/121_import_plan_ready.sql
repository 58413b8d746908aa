-- object: function idem.import_plan_ready(bigint, text)
-- grant: operator
-- import_plan_ready is what an import plan's approval or run checks before
-- its source is read (a read can take minutes): the caller is a person
-- (IX313), the plan exists (IX340), is an import (IX341, naming idemctl
-- record approve|run) and is at step p_step: 'approve' a planned plan
-- (IX341) of another person than the caller (IX342, four-eyes), 'run' an
-- approved plan (a staged one also running: a run that stopped), whose
-- classes still need no citation it lacks (IX343, idem.entry_plan_class_check).
-- The plan is locked (idem.entry_plan_lock): in the approval's and the
-- reading run's long transaction (idem.import_check_open,
-- idem.import_stage_open), nobody aborts or approves it meanwhile. The
-- functions that act check again. Returns the plan.
CREATE OR REPLACE FUNCTION idem.import_plan_ready(p_id bigint, p_step text)
RETURNS idem.entry_plan
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_person text := idem.require_person(CASE p_step WHEN 'approve' THEN 'approve an import plan' ELSE 'run an import' END);
    v_p      idem.entry_plan := idem.entry_plan_lock(p_id);
BEGIN
    IF p_step IS DISTINCT FROM 'approve' AND p_step IS DISTINCT FROM 'run' THEN
        RAISE EXCEPTION 'import plan %: no step %', p_id, quote_nullable(p_step) USING ERRCODE = 'IX341';
    END IF;
    IF v_p.kind <> 'import' THEN
        RAISE EXCEPTION 'entry plan % is a % plan, not an import: % it with idemctl record % %', p_id, v_p.kind, p_step, p_step, p_id
            USING ERRCODE = 'IX341';
    END IF;
    IF p_step = 'approve' THEN
        IF v_p.state <> 'planned' THEN
            RAISE EXCEPTION 'import plan % is %, not planned', p_id, v_p.state USING ERRCODE = 'IX341';
        END IF;
        IF v_person = v_p.planned_person THEN
            RAISE EXCEPTION 'import plan % was planned by % (login %): another person must approve it (four-eyes)',
                    p_id, v_p.planned_person, v_p.planned_db_user
                USING ERRCODE = 'IX342';
        END IF;
    ELSIF NOT (v_p.state = 'approved' OR (v_p.staged AND v_p.state = 'running')) THEN
        RAISE EXCEPTION 'entry plan % is %: only an approved import plan runs', p_id, v_p.state
            USING ERRCODE = 'IX341',
                  HINT = CASE WHEN v_p.state = 'planned' THEN 'another person approves it first: idemctl import approve ' || p_id
                              ELSE 'nothing entered' END;
    ELSIF v_p.state = 'approved' THEN
        PERFORM idem.entry_plan_class_check(p_id); -- a class may have become money since the approval
    END IF;
    RETURN v_p;
END
$$;
