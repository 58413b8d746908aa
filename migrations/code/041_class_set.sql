-- object: function idem.class_set(text, text, interval, boolean, text, text)
-- grant: operator
-- class_set changes a class's retention and, when p_set_min_age, its min-age
-- floor (NULL for none), and records the change with its before and after.
-- Weakening a forever class (money) to horizon needs a reason (IX306).
-- Returns the class as it now is.
CREATE OR REPLACE FUNCTION idem.class_set(
    p_name text, p_retention text, p_min_age interval, p_set_min_age boolean, p_operator text, p_reason text
) RETURNS idem.op_class
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_old idem.op_class;
    v_new idem.op_class;
BEGIN
    PERFORM idem.check_operator(p_operator, 'class set');
    IF p_reason IS NOT NULL AND idem.text_problem('a reason', p_reason, 4096) IS NOT NULL THEN
        RAISE EXCEPTION 'class set: %', idem.text_problem('a reason', p_reason, 4096) USING ERRCODE = 'IX306';
    END IF;
    IF p_retention IS NULL OR p_retention NOT IN ('forever', 'horizon') THEN
        RAISE EXCEPTION 'retention %: use forever or horizon', coalesce(quote_literal(p_retention), 'NULL') USING ERRCODE = 'IX306';
    END IF;
    IF p_set_min_age AND p_min_age < interval '0' THEN
        RAISE EXCEPTION 'min-age must not be negative' USING ERRCODE = 'IX306';
    END IF;
    SELECT * INTO v_old FROM idem.op_class WHERE name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown operation class %', quote_literal(p_name)
            USING ERRCODE = 'IX003', HINT = 'idemctl class list shows them';
    END IF;
    IF v_old.retention = 'forever' AND p_retention = 'horizon' AND idem.text_problem('a reason', p_reason, 4096) IS NOT NULL THEN
        RAISE EXCEPTION 'class % is forever (money): making it purgeable by horizon alone needs a reason: %', p_name,
                idem.text_problem('a reason', p_reason, 4096)
            USING ERRCODE = 'IX306', HINT = 'pass --reason';
    END IF;
    UPDATE idem.op_class
    SET retention = p_retention, min_age = CASE WHEN p_set_min_age THEN p_min_age ELSE min_age END
    WHERE name = p_name
    RETURNING * INTO v_new;
    PERFORM idem.audit_write(p_operator, 'horizon.class.set', 'class:' || p_name, jsonb_build_object(
        'before', jsonb_build_object('retention', v_old.retention, 'min_age_seconds', extract(epoch FROM v_old.min_age)),
        'after', jsonb_build_object('retention', v_new.retention, 'min_age_seconds', extract(epoch FROM v_new.min_age)),
        'reason', p_reason)::text);
    RETURN v_new;
END
$$;
