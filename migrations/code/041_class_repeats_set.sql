-- object: function idem.class_repeats_set(text, boolean, text, text)
-- grant: operator
-- class_repeats_set declares whether a class's payloads legitimately repeat
-- (idemctl suspects then leaves the class out unless it is named), with a
-- reason, and records the change with its before and after. Returns the
-- value before the change.
CREATE OR REPLACE FUNCTION idem.class_repeats_set(p_name text, p_repeats boolean, p_operator text, p_reason text)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_old boolean;
BEGIN
    PERFORM idem.check_operator(p_operator, 'class set');
    IF p_repeats IS NULL THEN
        RAISE EXCEPTION 'payloads-repeat: say yes or no' USING ERRCODE = 'IX306';
    END IF;
    IF idem.text_problem('a reason', p_reason, 4096) IS NOT NULL THEN
        RAISE EXCEPTION 'class set --payloads-repeat: %', idem.text_problem('a reason', p_reason, 4096)
            USING ERRCODE = 'IX306', HINT = 'pass --reason: it is kept in the audit log';
    END IF;
    SELECT payloads_repeat INTO v_old FROM idem.op_class WHERE name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown operation class %', quote_literal(p_name)
            USING ERRCODE = 'IX003', HINT = 'idemctl class list shows them';
    END IF;
    UPDATE idem.op_class SET payloads_repeat = p_repeats WHERE name = p_name;
    PERFORM idem.audit_write(p_operator, 'class.payloads_repeat', 'class:' || p_name, jsonb_build_object(
        'before', v_old, 'after', p_repeats, 'reason', p_reason)::text);
    RETURN v_old;
END
$$;
