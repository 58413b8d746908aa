-- object: function idem.horizon_abort(bigint, text, text, jsonb)
-- grant: operator
-- horizon_abort ends a plan that is planned, approved or purging: a purge's
-- re-probe found what the plan did not account for, or an operator cancels
-- it. A purge running meanwhile stops at its next batch (every batch locks
-- the plan and needs it purging). Recorded in the audit log with p_evidence.
CREATE OR REPLACE FUNCTION idem.horizon_abort(p_plan bigint, p_operator text, p_reason text, p_evidence jsonb)
RETURNS idem.horizon_plan
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_problem text := idem.decision_input_problem(p_operator, p_reason);
    v_p       idem.horizon_plan;
    v_from    text;
BEGIN
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'abort plan %: %', coalesce(p_plan::text, 'NULL'), v_problem USING ERRCODE = 'IX015';
    END IF;
    v_p := idem.horizon_lock_plan(p_plan);
    IF v_p.state NOT IN ('planned', 'approved', 'purging') THEN
        RAISE EXCEPTION 'purge plan % is already %', v_p.id, v_p.state USING ERRCODE = 'IX302';
    END IF;
    v_from := v_p.state;
    UPDATE idem.horizon_plan
    SET state = 'aborted', aborted_at = now(), aborted_by = p_operator, abort_reason = p_reason,
        runner_pid = NULL, runner_login = NULL, runner_person = NULL
    WHERE id = p_plan
    RETURNING * INTO v_p;
    PERFORM idem.audit_write(p_operator, 'horizon.purge.abort', 'horizon_plan:' || p_plan, jsonb_build_object(
        'reason', p_reason, 'state_before', v_from, 'purged_before', v_p.purged, 'evidence', p_evidence)::text);
    RETURN v_p;
END
$$;
