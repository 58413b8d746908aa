-- object: function idem.entry_plan_abort(bigint, text, text)
-- grant: operator
-- entry_plan_abort ends an entry plan that will not run: one still staging,
-- planned (the approver rejects it, or the planner withdraws it) or approved
-- and not started. Like a governed change's abort, any person may do it
-- (stopping needs no second pair of eyes; a login with no person, IX313),
-- with a reason (IX343). An import plan's stage (idem.import_stage_<id>,
-- an unlogged table the size of the source) is dropped with it, so a plan
-- that never runs does not keep it. A running plan (its committed chunks
-- entered) is not aborted but finished by running it again, unless its
-- stage no longer holds its rows (an unlogged table is emptied when the
-- database restarts after a crash): such a plan can never finish, so it is
-- aborted, what its committed chunks entered stays (the audit row counts
-- them), and a new plan of the same source skips it. A done or aborted plan
-- is over (IX341). Audited (entry.abort, with whether a stage was dropped,
-- its rows, and the chunks a running plan had entered). A later approve or
-- run of it is refused (IX341: it is aborted). Returns the plan.
CREATE OR REPLACE FUNCTION idem.entry_plan_abort(p_id bigint, p_operator text, p_reason text)
RETURNS idem.entry_plan
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_person  text := idem.require_person('abort an entry plan');
    v_problem text := idem.decision_input_problem(p_operator, p_reason);
    v_p       idem.entry_plan;
    v_from    text;
    v_t       text := format('idem.%I', 'import_stage_' || p_id);
    v_rows    bigint;
    v_chunks  bigint;
BEGIN
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'abort entry plan %: %', coalesce(p_id::text, 'NULL'), v_problem
            USING ERRCODE = 'IX343', HINT = 'pass --reason';
    END IF;
    v_p := idem.entry_plan_lock(p_id);
    IF v_p.state NOT IN ('staging', 'planned', 'approved', 'running') THEN
        RAISE EXCEPTION 'entry plan % is %: only a plan not yet run is aborted', p_id, v_p.state USING ERRCODE = 'IX341';
    END IF;
    IF to_regclass(v_t) IS NOT NULL THEN
        EXECUTE format('SELECT count(*) FROM %s', v_t) INTO v_rows;
    END IF;
    IF v_p.state = 'running' THEN
        IF v_rows IS NOT DISTINCT FROM v_p.items::bigint THEN
            RAISE EXCEPTION 'entry plan % is running: only a plan not yet run, or one whose stage a crash emptied, is aborted', p_id
                USING ERRCODE = 'IX341', HINT = 'its committed chunks entered: run it again to finish it';
        END IF;
        SELECT count(*) INTO v_chunks FROM idem.import_chunk c WHERE c.plan_id = p_id;
    END IF;
    v_from := v_p.state;
    IF v_rows IS NOT NULL THEN
        EXECUTE format('DROP TABLE %s', v_t);
    END IF;
    UPDATE idem.entry_plan
    SET state = 'aborted', aborted_at = now(), aborted_by = p_operator, abort_reason = p_reason
    WHERE id = p_id
    RETURNING * INTO v_p;
    PERFORM idem.audit_write(p_operator, 'entry.abort', 'entry_plan:' || p_id,
        (jsonb_build_object('kind', v_p.kind, 'state_before', v_from, 'reason', p_reason, 'person', v_person,
                           'stage_dropped', v_rows IS NOT NULL, 'stage_rows', v_rows)
        || CASE WHEN v_chunks IS NOT NULL THEN jsonb_build_object('chunks_entered', v_chunks) ELSE '{}'::jsonb END)::text);
    RETURN v_p;
END
$$;
