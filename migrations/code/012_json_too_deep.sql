-- object: function idem.json_too_deep(text, integer)
-- json_too_deep reports whether a JSON text nests arrays and objects deeper
-- than p_max ({} and [] have depth 1, a scalar 0), without parsing it into
-- jsonb. A text with at most p_max brackets cannot be too deep, which settles
-- almost every payload at the cost of one translate(); otherwise strings are
-- removed, then innermost bracket pairs, one level a pass.
CREATE OR REPLACE FUNCTION idem.json_too_deep(p_json text, p_max integer)
RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    v_brackets text;
BEGIN
    IF length(p_json) - length(translate(p_json, '[{', '')) <= p_max THEN
        RETURN false;
    END IF;
    v_brackets := regexp_replace(regexp_replace(p_json, '"(?:[^"\\]|\\.)*"', '', 'g'), '[^][{}]', '', 'g');
    FOR level IN 1..p_max LOOP
        v_brackets := regexp_replace(v_brackets, '\[\]|\{\}', '', 'g');
        IF v_brackets = '' THEN
            RETURN false;
        END IF;
    END LOOP;
    RETURN true;
END
$$;
