-- object: function idem.horizon_purge_finish(bigint, text, jsonb)
-- grant: operator
-- horizon_purge_finish ends a purge this session is running (see
-- idem.horizon_lock_purging): the plan becomes done, the audit log records
-- the counts, and the plan has no runner any more. Returns the plan.
CREATE OR REPLACE FUNCTION idem.horizon_purge_finish(p_plan bigint, p_operator text, p_stats jsonb)
RETURNS idem.horizon_plan
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_p idem.horizon_plan := idem.horizon_lock_purging(p_plan);
BEGIN
    UPDATE idem.horizon_plan SET state = 'done', finished_at = now(), runner_pid = NULL, runner_login = NULL, runner_person = NULL
    WHERE id = p_plan RETURNING * INTO v_p;
    PERFORM idem.audit_write(p_operator, 'horizon.purge.finish', 'horizon_plan:' || p_plan, jsonb_build_object(
        'purged', v_p.purged, 'candidates', v_p.candidates, 'transactions', v_p.batches,
        'this_run', coalesce(p_stats, '{}'::jsonb))::text);
    RETURN v_p;
END
$$;
