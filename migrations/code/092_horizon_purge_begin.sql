-- object: function idem.horizon_purge_begin(bigint, text, jsonb)
-- grant: operator
-- horizon_purge_begin starts (or resumes) the purge of an approved plan in
-- this session: the login must map to a person (IX313), the plan must be
-- approved or purging (IX302), an approved plan must not have expired
-- (IX315; a purge already running resumes), a forever class still needs the plan's
-- contract (IX304), no entry plan may have entered identities into its range
-- since it was made (IX316, idem.horizon_entered_after: plan again), and no
-- other live session may be running it (IX310). The
-- login itself must hold the operator role (42501). It records this session
-- (backend pid, login, person) as the plan's runner, which the purge's
-- batches check (idem.horizon_lock_purging) and which idem.horizon_purge_finish
-- and idem.horizon_purge_release clear (ran_person and ran_db_user keep who
-- ran it after that); a runner whose session ended no
-- longer holds the plan. Recorded in the audit log with the re-probe's
-- evidence.
CREATE OR REPLACE FUNCTION idem.horizon_purge_begin(p_plan bigint, p_operator text, p_reprobe jsonb)
RETURNS idem.horizon_plan
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_person text := idem.require_person('run a purge');
    v_p      idem.horizon_plan;
    v_class  idem.op_class;
    v_resume boolean;
    v_now    timestamptz := now(); -- a value: Citus takes no now() inside COALESCE on a reference table
BEGIN
    -- The person runs it with a login that holds the operator role itself
    -- (this function's grant), not through a role it set.
    IF NOT has_function_privilege(session_user, 'idem.horizon_purge_begin(bigint, text, jsonb)', 'EXECUTE') THEN
        RAISE EXCEPTION 'login % does not hold the operator role: it cannot run a purge', session_user USING ERRCODE = '42501';
    END IF;
    PERFORM idem.check_operator(p_operator, 'purge');
    v_p := idem.horizon_lock_plan(p_plan);
    IF v_p.state NOT IN ('approved', 'purging') THEN
        RAISE EXCEPTION 'purge plan % is %: %', v_p.id, v_p.state, CASE v_p.state
                WHEN 'planned' THEN 'a purge needs it approved by another person first (idemctl horizon approve)'
                WHEN 'done' THEN 'nothing is left to purge'
                ELSE 'it is never purged: make a new plan (idemctl horizon plan)' END
            USING ERRCODE = 'IX302';
    END IF;
    IF v_p.state = 'approved' AND v_p.expires_at IS NOT NULL AND v_p.expires_at <= now() THEN
        RAISE EXCEPTION 'purge plan % expired at %: its proof is stale', v_p.id, v_p.expires_at
            USING ERRCODE = 'IX315', HINT = 'cancel it and plan again: idemctl horizon plan';
    END IF;
    SELECT * INTO v_class FROM idem.op_class WHERE name = v_p.op_class;
    IF v_class.retention = 'forever' AND (v_p.contract IS NULL OR v_p.action <> 'purge') THEN
        RAISE EXCEPTION 'class % is forever now and plan % cites no contract', v_p.op_class, v_p.id USING ERRCODE = 'IX304';
    END IF;
    IF cardinality(idem.horizon_entered_after(v_p.id)) > 0 THEN
        RAISE EXCEPTION 'purge plan %: entry plan % entered identities of class % before its cutoff after the plan counted its candidates: nothing was deleted',
                v_p.id, array_to_string(idem.horizon_entered_after(v_p.id), ', '), v_p.op_class
            USING ERRCODE = 'IX316', HINT = 'cancel it and plan again (after a running import is done): idemctl horizon plan';
    END IF;
    -- The runner is a session: its pid and login, while a session with both
    -- is connected (a pid is reused only after its session ended).
    IF v_p.runner_pid IS NOT NULL AND v_p.runner_pid <> pg_backend_pid()
       AND EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = v_p.runner_pid AND a.usename = v_p.runner_login) THEN
        RAISE EXCEPTION 'purge plan % is being purged by another session (login %, person %)', v_p.id, v_p.runner_login, v_p.runner_person
            USING ERRCODE = 'IX310', HINT = 'wait for it (idemctl horizon status), or abort the plan';
    END IF;
    v_resume := v_p.state = 'purging';
    UPDATE idem.horizon_plan SET state = 'purging', purge_started_at = coalesce(purge_started_at, v_now),
                                 runner_pid = pg_backend_pid(), runner_login = session_user, runner_person = v_person,
                                 ran_person = v_person, ran_db_user = session_user
    WHERE id = p_plan
    RETURNING * INTO v_p;
    PERFORM idem.audit_write(p_operator, 'horizon.purge.start', 'horizon_plan:' || p_plan, jsonb_build_object(
        'resumed', v_resume, 'purged_before', v_p.purged, 'person', v_person, 'login', session_user::text,
        'reprobe', p_reprobe)::text);
    RETURN v_p;
END
$$;
