-- object: function idem.json_pointer_token(text)
-- json_pointer_token escapes one object member name as an RFC 6901 reference
-- token: "~" becomes "~0" and "/" becomes "~1" (in that order).
CREATE OR REPLACE FUNCTION idem.json_pointer_token(p_key text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$ SELECT replace(replace(p_key, '~', '~0'), '/', '~1') $$;
