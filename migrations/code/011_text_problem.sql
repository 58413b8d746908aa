-- object: function idem.text_problem(text, text, integer)
-- text_problem says what is wrong with a free-text field an operator typed (an
-- operator label, a reason, a contract reference, a source name), or NULL:
-- it is required, at most p_max bytes, and holds no control character (a
-- reason printed on another operator's terminal must not be able to rewrite
-- it). p_what names the field in the message.
CREATE OR REPLACE FUNCTION idem.text_problem(p_what text, p_value text, p_max integer)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
    SELECT CASE
        WHEN p_value IS NULL OR btrim(p_value) = '' THEN p_what || ' is required'
        WHEN octet_length(p_value) > p_max THEN format('%s is longer than %s bytes', p_what, p_max)
        WHEN p_value ~ '[\x01-\x1f\x7f-\x9f]' THEN p_what || ' contains a control character (refused: it would reach a terminal)'
    END
$$;
