-- object: function idem.governed_change_lock(bigint)
-- governed_change_lock locks a governed change and returns it, or raises
-- IX330 when there is none. Internal: granted to nobody.
CREATE OR REPLACE FUNCTION idem.governed_change_lock(p_id bigint)
RETURNS idem.governed_change
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_c idem.governed_change;
BEGIN
    SELECT * INTO v_c FROM idem.governed_change WHERE id = p_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no governed change %', coalesce(p_id::text, 'NULL')
            USING ERRCODE = 'IX330', HINT = 'idemctl change list shows them';
    END IF;
    RETURN v_c;
END
$$;
