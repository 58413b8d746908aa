-- object: function idem.horizon_lock_purging(bigint)
-- horizon_lock_purging locks plan p_plan for one purge transaction and returns
-- it, or raises unless it exists (IX301), is purging (IX302: not yet begun,
-- aborted meanwhile, or done) and this session is its purge's runner (IX310:
-- idem.horizon_purge_begin took the runner's lock, so one purge of a plan
-- runs at a time and a crashed runner's lock goes with its session).
CREATE OR REPLACE FUNCTION idem.horizon_lock_purging(p_plan bigint)
RETURNS idem.horizon_plan
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_p idem.horizon_plan;
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
    IF NOT EXISTS (SELECT 1 FROM pg_locks l
                   WHERE l.locktype = 'advisory' AND l.pid = pg_backend_pid() AND l.granted
                     AND l.classid = 1768189296::oid AND l.objid = p_plan::oid AND l.objsubid = 2) THEN
        RAISE EXCEPTION 'purge plan %: this session is not running its purge', v_p.id
            USING ERRCODE = 'IX310', HINT = 'run idemctl horizon purge, which begins (or resumes) it';
    END IF;
    RETURN v_p;
END
$$;
