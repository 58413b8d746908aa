-- object: function idem.horizon_purge_release(bigint)
-- grant: operator
-- horizon_purge_release gives up this session's hold on a plan as its runner
-- (an interrupted purge): the plan stays purging, and idemctl horizon purge
-- resumes it. Returns whether this session held it.
CREATE OR REPLACE FUNCTION idem.horizon_purge_release(p_plan bigint)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
BEGIN
    UPDATE idem.horizon_plan SET runner_pid = NULL, runner_login = NULL, runner_person = NULL
    WHERE id = p_plan AND runner_pid = pg_backend_pid() AND runner_login = session_user::text;
    RETURN FOUND;
END
$$;
