-- object: function idem.json_diff(jsonb, jsonb)
-- json_diff lists EVERY difference between two JSON documents, as a jsonb array
-- of {"path", "change", "stored", "incoming"} in document order:
--   path      RFC 6901 JSON Pointer of the differing value ("" is the whole document);
--   change    added        the member or element exists only in incoming ("stored" is null);
--             removed      it exists only in stored ("incoming" is null);
--             type_changed both exist with different JSON types;
--             changed      both exist with the same type and different values;
--   stored, incoming  the two values (whole subtrees for type changes, added and removed).
-- Objects are compared member by member (sorted by name), arrays element by
-- element (index i against index i). A recursive CTE rather than a recursive
-- function: no stack depth limit, and equal subtrees are pruned at once.
CREATE OR REPLACE FUNCTION idem.json_diff(p_stored jsonb, p_incoming jsonb)
RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
    WITH RECURSIVE walk(path, ord, s, i) AS (
        SELECT ''::text, ARRAY[]::text[], p_stored, p_incoming
        UNION ALL
        SELECT w.path || '/' || c.token, w.ord || c.ord, c.s, c.i
        FROM walk w
        CROSS JOIN LATERAL (
            SELECT idem.json_pointer_token(k.key) AS token, k.key AS ord, w.s -> k.key AS s, w.i -> k.key AS i
            FROM (SELECT jsonb_object_keys(CASE WHEN jsonb_typeof(w.s) = 'object' THEN w.s ELSE '{}' END)
                  UNION
                  SELECT jsonb_object_keys(CASE WHEN jsonb_typeof(w.i) = 'object' THEN w.i ELSE '{}' END)) AS k(key)
            WHERE jsonb_typeof(w.s) = 'object' AND jsonb_typeof(w.i) = 'object'
            UNION ALL
            -- Indexes are zero-padded in the sort key so that /10 comes after /9.
            SELECT n::text, lpad(n::text, 10, '0'), w.s -> n, w.i -> n
            FROM generate_series(0, greatest(
                    jsonb_array_length(CASE WHEN jsonb_typeof(w.s) = 'array' THEN w.s ELSE '[]' END),
                    jsonb_array_length(CASE WHEN jsonb_typeof(w.i) = 'array' THEN w.i ELSE '[]' END)) - 1) AS n
            WHERE jsonb_typeof(w.s) = 'array' AND jsonb_typeof(w.i) = 'array'
        ) c
        WHERE w.s <> w.i
    )
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'path', path,
               'change', CASE
                   WHEN s IS NULL THEN 'added'
                   WHEN i IS NULL THEN 'removed'
                   WHEN jsonb_typeof(s) <> jsonb_typeof(i) THEN 'type_changed'
                   ELSE 'changed' END,
               'stored', s,
               'incoming', i) ORDER BY ord COLLATE "C"), '[]'::jsonb)
    FROM walk
    WHERE s IS DISTINCT FROM i
      AND NOT coalesce(jsonb_typeof(s) = 'object' AND jsonb_typeof(i) = 'object', false)
      AND NOT coalesce(jsonb_typeof(s) = 'array' AND jsonb_typeof(i) = 'array', false)
$$;
