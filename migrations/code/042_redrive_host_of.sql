-- object: function idem.redrive_host_of(text)
-- redrive_host_of returns the lower-case host of an http(s) or nats URL (an
-- IPv6 address without its brackets), or NULL when the URL has none (or a
-- bracketed address followed by anything but a port, path, query or end).
CREATE OR REPLACE FUNCTION idem.redrive_host_of(p_url text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
    SELECT lower(coalesce(m[1], m[2]))
    FROM regexp_match(p_url, '^[a-zA-Z][a-zA-Z0-9+.-]*://(?:[^@/?#]*@)?(?:\[([0-9a-fA-F:.]+)\](?=[:/?#]|$)|([^:/?#\[\]]+))') AS m(m)
$$;
