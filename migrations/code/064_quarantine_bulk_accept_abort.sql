-- object: function idem.quarantine_bulk_accept_abort(bigint, text, text)
-- grant: operator
-- quarantine_bulk_accept_abort stops a bulk accept-as-new plan that is not
-- finished: what already ran stays (each decision is final); nothing else of
-- it will run. Recorded in the audit log. Returns the plan.
CREATE OR REPLACE FUNCTION idem.quarantine_bulk_accept_abort(p_plan bigint, p_operator text, p_reason text)
RETURNS idem.quarantine_bulk_accept
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_problem text := idem.decision_input_problem(p_operator, p_reason);
    v_p       idem.quarantine_bulk_accept;
BEGIN
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'abort bulk accept-as-new plan %: %', coalesce(p_plan::text, 'NULL'), v_problem
            USING ERRCODE = 'IX104', HINT = 'pass --reason and --operator (or set IDEMCTL_OPERATOR)';
    END IF;
    v_p := idem.quarantine_bulk_accept_lock(p_plan);
    IF v_p.state IN ('done', 'aborted') THEN
        RAISE EXCEPTION 'bulk accept-as-new plan % is already %', v_p.id, v_p.state USING ERRCODE = 'IX121';
    END IF;
    UPDATE idem.quarantine_bulk_accept
    SET state = 'aborted', aborted_at = now(), aborted_by = p_operator, abort_reason = p_reason
    WHERE id = p_plan
    RETURNING * INTO v_p;
    PERFORM idem.audit_write(p_operator, 'quarantine.bulk_accept_abort', 'quarantine_bulk_accept:' || p_plan,
        jsonb_build_object('reason', p_reason, 'accepted', v_p.accepted, 'skipped', v_p.skipped)::text);
    RETURN v_p;
END
$$;
