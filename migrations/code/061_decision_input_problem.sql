-- object: function idem.decision_input_problem(text, text)
-- decision_input_problem says what is wrong with a decision's operator label
-- or reason, or NULL.
CREATE OR REPLACE FUNCTION idem.decision_input_problem(p_operator text, p_reason text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
    SELECT coalesce(idem.text_problem('the operator label', p_operator, 256), idem.text_problem('a reason', p_reason, 4096))
$$;
