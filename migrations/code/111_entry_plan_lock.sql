-- object: function idem.entry_plan_lock(bigint)
-- entry_plan_lock locks an entry plan and returns it, or raises IX340 when
-- there is none. Internal: granted to nobody.
CREATE OR REPLACE FUNCTION idem.entry_plan_lock(p_id bigint)
RETURNS idem.entry_plan
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_p idem.entry_plan;
BEGIN
    SELECT * INTO v_p FROM idem.entry_plan WHERE id = p_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no entry plan %', coalesce(p_id::text, 'NULL')
            USING ERRCODE = 'IX340', HINT = 'idemctl record list shows them';
    END IF;
    RETURN v_p;
END
$$;
