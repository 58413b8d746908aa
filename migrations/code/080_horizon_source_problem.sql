-- object: function idem.horizon_source_problem(text, jsonb)
-- horizon_source_problem says what is wrong with a replay source's config,
-- as "SQLSTATE message", or NULL. A config is stored, listed and written for
-- ever into the audit log, so it holds no credential (IX311) in the forms a
-- client would read one from:
--   only the settings of its kind (postgres: dsn, query, password_env;
--   archive: dir; nats: url, stream; kafka: brokers, topic; nats and kafka:
--   mode, tenant_header, operation_header), each a string (brokers an array
--   of strings): nothing nested, no other key (IX308; IX311 when its name
--   says credential);
--   no password= or sslpassword= in any string; in a DSN, URL or broker no
--   key=value whose key says password, secret, token or credential, and no
--   percent-escaped key (pass%77ord);
--   no password in a DSN's userinfo (postgres://user:password@, up to the
--   first '/', as libpq reads it); no userinfo at all (a NATS token is a bare
--   user@) in any server of a NATS list or in a Kafka broker.
-- password_env names a variable IDEMCTL_SOURCE_...: it is read from the
-- environment of whoever probes the source, and sent to the source's host.
-- idemctl reads each kind with its client's own parser first (package
-- horizon); this is the database's own guard, for every caller.
CREATE OR REPLACE FUNCTION idem.horizon_source_problem(p_kind text, p_config jsonb)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
    WITH own(key) AS (
        SELECT unnest(CASE p_kind
            WHEN 'postgres' THEN ARRAY['dsn', 'query', 'password_env']
            WHEN 'archive' THEN ARRAY['dir']
            WHEN 'nats' THEN ARRAY['url', 'stream', 'mode', 'tenant_header', 'operation_header']
            WHEN 'kafka' THEN ARRAY['brokers', 'topic', 'mode', 'tenant_header', 'operation_header']
        END)
    ), entry AS (
        SELECT e.key, e.value FROM jsonb_each(p_config) e
    ), string AS (
        SELECT key, value #>> '{}' AS s FROM entry WHERE jsonb_typeof(value) = 'string'
        UNION ALL
        SELECT key, b #>> '{}' FROM entry, jsonb_array_elements(CASE jsonb_typeof(value) WHEN 'array' THEN value ELSE '[]' END) b
        WHERE jsonb_typeof(b) = 'string'
    ), problem(rank, msg) AS (
        SELECT 1, 'IX311 setting ' || key || ' names a credential; secrets are never stored in the database'
        FROM entry WHERE key ~* '(pass|pwd|secret|token|credential|private_key)' AND key <> 'password_env'
        UNION ALL
        SELECT 2, 'IX308 unknown setting ' || key || ' for a ' || p_kind || ' source'
        FROM entry WHERE key NOT IN (SELECT key FROM own)
        UNION ALL
        SELECT 3, 'IX308 setting ' || key || ' must be ' || CASE key WHEN 'brokers' THEN 'an array of strings' ELSE 'a string' END
        FROM entry
        WHERE CASE key WHEN 'brokers'
                  THEN jsonb_typeof(value) <> 'array' OR EXISTS (SELECT 1 FROM jsonb_array_elements(value) b WHERE jsonb_typeof(b) <> 'string')
                  ELSE jsonb_typeof(value) <> 'string' END
        UNION ALL
        SELECT 3, 'IX308 password_env must name a variable IDEMCTL_SOURCE_... (read from the environment of whoever probes the source)'
        FROM string WHERE key = 'password_env' AND s !~ '^IDEMCTL_SOURCE_[A-Z0-9_]+$'
        UNION ALL
        SELECT 4, 'IX311 setting ' || key || ' holds a credential; secrets are never stored in the database'
        FROM string
        WHERE s ~* '(^|[\s?&])(password|sslpassword)\s*='
           OR (key IN ('dsn', 'url', 'brokers') AND s ~* '(^|[\s?&;])[^=\s&;]*(pass|pwd|secret|token|credential)[^=\s&;]*\s*=')
           OR (key IN ('dsn', 'url') AND s ~ '(^|[\s?&;])[^=\s&;]*%[0-9A-Fa-f]{2}[^=\s&;]*\s*=')
           OR (key = 'dsn' AND s ~ '^[a-zA-Z][a-zA-Z0-9+.-]*://[^/@]*:[^/]*@')
           OR (key = 'url' AND s ~ '(^|,)\s*([a-zA-Z][a-zA-Z0-9+.-]*://)?[^/?#,@\s]*@')
           OR (key = 'brokers' AND s ~ '@')
    )
    SELECT msg FROM problem ORDER BY rank LIMIT 1
$$;
