-- object: function idem.check_operator(text, text)
-- check_operator raises IX015 unless p_operator is a usable --operator label
-- (see idem.text_problem); p_act names what was refused in the message.
CREATE OR REPLACE FUNCTION idem.check_operator(p_operator text, p_act text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_problem text := idem.text_problem('the operator label', p_operator, 256);
BEGIN
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION '%: %', p_act, v_problem
            USING ERRCODE = 'IX015', HINT = 'pass --operator or set IDEMCTL_OPERATOR';
    END IF;
END
$$;
