-- object: function idem.horizon_purge_release(bigint)
-- grant: operator
-- horizon_purge_release gives up this session's runner lock on a plan (an
-- interrupted purge): the plan stays purging, and idemctl horizon purge
-- resumes it. Returns whether this session held it.
CREATE OR REPLACE FUNCTION idem.horizon_purge_release(p_plan bigint)
RETURNS boolean
LANGUAGE sql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$ SELECT pg_advisory_unlock(1768189296, p_plan::integer) $$;
