-- object: function idem.horizon_lock_purging(bigint)
-- horizon_lock_purging locks plan p_plan for one purge transaction and returns
-- it, or raises unless the login maps to a person (IX313), the plan exists
-- (IX301), is purging (IX302: not yet begun, aborted meanwhile, or done) and
-- this session is its purge's runner (IX310): the session, login and person
-- idem.horizon_purge_begin recorded with the plan, so one purge of a plan runs
-- at a time, by the person who began it, and nothing another login can take
-- stands in for the runner.
CREATE OR REPLACE FUNCTION idem.horizon_lock_purging(p_plan bigint)
RETURNS idem.horizon_plan
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_person text := idem.require_person('run a purge');
    v_p      idem.horizon_plan;
BEGIN
    SELECT * INTO v_p FROM idem.horizon_plan WHERE id = p_plan FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no purge plan % (idemctl horizon status lists the plans)', coalesce(p_plan::text, 'NULL')
            USING ERRCODE = 'IX301';
    END IF;
    IF v_p.state <> 'purging' THEN
        RAISE EXCEPTION 'purge plan % is %, not purging: nothing was deleted%', v_p.id, v_p.state,
                CASE WHEN v_p.state = 'aborted' THEN format(' (aborted by %s: %s)', v_p.aborted_by, v_p.abort_reason) ELSE '' END
            USING ERRCODE = 'IX302';
    END IF;
    IF v_p.runner_pid IS DISTINCT FROM pg_backend_pid() OR v_p.runner_login IS DISTINCT FROM session_user::text
       OR v_p.runner_person IS DISTINCT FROM v_person THEN
        RAISE EXCEPTION 'purge plan %: this session is not running its purge', v_p.id
            USING ERRCODE = 'IX310', HINT = 'run idemctl horizon purge, which begins (or resumes) it';
    END IF;
    RETURN v_p;
END
$$;
