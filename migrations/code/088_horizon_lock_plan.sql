-- object: function idem.horizon_lock_plan(bigint)
-- horizon_lock_plan locks plan p_plan for a change of state and returns it,
-- or raises IX301 when there is none.
CREATE OR REPLACE FUNCTION idem.horizon_lock_plan(p_plan bigint)
RETURNS idem.horizon_plan
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_p idem.horizon_plan;
BEGIN
    SELECT * INTO v_p FROM idem.horizon_plan WHERE id = p_plan FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no purge plan % (idemctl horizon status lists the plans)', coalesce(p_plan::text, 'NULL')
            USING ERRCODE = 'IX301';
    END IF;
    RETURN v_p;
END
$$;
