-- object: function idem.audit_row_hash(bigint, timestamptz, text, text, text, text, text, text, text)
-- audit_row_hash is the hash of one audit row, defined so that anyone can
-- recompute it without PostgreSQL (idemctl audit verify does, in Go):
--
--   hash  = "sha256:" + lowercase hex of SHA-256(bytes)
--   bytes = "idem.audit/v2\n" + field(id) + field(at) + field(actor) + field(person)
--           + field(db_user) + field(action) + field(target) + field(details) + field(prev_hash)
--   field(s) = decimal byte length of s (UTF-8) + ":" + s + "\n"
--   id    decimal, e.g. "42"
--   at    UTC with microseconds, e.g. "2026-11-30T21:04:05.123456Z"
--   details  the exact text stored (a JSON object), byte for byte
--
-- Length prefixes make the encoding unambiguous whatever a field holds.
CREATE OR REPLACE FUNCTION idem.audit_row_hash(
    p_id bigint, p_at timestamptz, p_actor text, p_person text, p_db_user text, p_action text, p_target text,
    p_details text, p_prev_hash text
) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
    SELECT 'sha256:' || encode(sha256(convert_to('idem.audit/v2' || chr(10) || string_agg(
               octet_length(f)::text || ':' || f || chr(10), '' ORDER BY n), 'UTF8')), 'hex')
    FROM unnest(ARRAY[p_id::text, to_char(p_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                      p_actor, p_person, p_db_user, p_action, p_target, p_details, p_prev_hash])
         WITH ORDINALITY AS u(f, n)
$$;
