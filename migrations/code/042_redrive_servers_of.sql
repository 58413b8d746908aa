-- object: function idem.redrive_servers_of(text, text)
-- redrive_servers_of returns the servers a re-drive of kind p_kind connects
-- to, as URLs: the URL itself for http; for nats every entry of its
-- comma-separated server list, trimmed, with nats:// before an entry that has
-- no scheme (as the NATS client reads it). NULL when there is none.
CREATE OR REPLACE FUNCTION idem.redrive_servers_of(p_kind text, p_url text)
RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
    SELECT CASE
               WHEN p_kind IS DISTINCT FROM 'nats' THEN ARRAY[p_url]
               ELSE (SELECT array_agg(CASE WHEN e ~ '://' THEN e ELSE 'nats://' || e END ORDER BY n)
                     FROM unnest(string_to_array(p_url, ',')) WITH ORDINALITY AS x(raw, n),
                          LATERAL btrim(raw, E' \t\n\r\f\v') AS e
                     WHERE e <> '')
           END
    WHERE p_url IS NOT NULL
$$;
