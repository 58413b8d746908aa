-- object: function idem.redrive_problem(jsonb)
-- grant: operator
-- redrive_problem says what is wrong with a re-drive configuration (see
-- idem.class_redrive_set), as "SQLSTATE message", or NULL when it is valid.
-- Every server of the URL (each entry of a NATS server list) is checked,
-- host, scheme and allow-list. Operators call it too, before a run sends to
-- a class: the allow-list may have changed since the class was set.
CREATE OR REPLACE FUNCTION idem.redrive_problem(p jsonb)
RETURNS text
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_url     text := p->>'url';
    v_kind    text := p->>'kind';
    v_servers text[];
    v_server  text;
    v_host    text;
    v_bad     text;
BEGIN
    SELECT string_agg(k, ', ') INTO v_bad FROM jsonb_object_keys(p) k
    WHERE k NOT IN ('kind', 'url', 'subject', 'method', 'headers', 'tenant_header', 'timeout_seconds', 'concurrency', 'insecure');
    IF v_bad IS NOT NULL THEN
        RETURN 'IX502 unknown setting ' || v_bad;
    ELSIF v_kind IS NULL OR v_kind NOT IN ('http', 'nats') THEN
        RETURN 'IX502 kind must be http or nats';
    ELSIF jsonb_typeof(p->'url') IS DISTINCT FROM 'string' THEN
        RETURN 'IX502 url must be a URL with a host';
    END IF;
    v_servers := idem.redrive_servers_of(v_kind, v_url);
    IF coalesce(cardinality(v_servers), 0) = 0 THEN
        RETURN 'IX502 url must be a URL with a host';
    END IF;
    FOREACH v_server IN ARRAY v_servers LOOP
        v_host := idem.redrive_host_of(v_server);
        IF v_host IS NULL THEN
            RETURN 'IX502 url must be a URL with a host, every server of it';
        ELSIF v_server ~ '^[a-zA-Z][a-zA-Z0-9+.-]*://[^/?#]*@' THEN
            RETURN 'IX503 the URL holds credentials; reference them in a header (env:IDEMCTL_REDRIVE_NAME or file:PATH)';
        ELSIF v_kind = 'http' AND v_server !~* '^https://' AND NOT (v_server ~* '^http://' AND (v_host IN ('127.0.0.1', 'localhost', '::1')
                  OR coalesce((p->>'insecure')::boolean, false))) THEN
            RETURN 'IX502 url must be https (or http to a loopback host, or http with --allow-insecure)';
        ELSIF v_kind = 'nats' AND v_server !~* '^(nats|tls)://' THEN
            RETURN 'IX502 nats needs nats:// or tls:// servers';
        ELSIF NOT EXISTS (SELECT 1 FROM idem.redrive_host h WHERE h.host = v_host) THEN
            RETURN format('IX504 host %s is not on the re-drive allow-list (the schema owner adds it: idemctl redrive allow %s)', v_host, v_host);
        END IF;
    END LOOP;
    IF v_kind = 'nats' AND coalesce(p->>'subject', '') !~ '^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$' THEN
        RETURN 'IX502 nats needs a subject without wildcards';
    ELSIF coalesce(p->>'method', 'POST') NOT IN ('POST', 'PUT') THEN
        RETURN 'IX502 method must be POST or PUT';
    ELSIF p ? 'timeout_seconds' AND NOT coalesce((p->>'timeout_seconds')::numeric > 0 AND (p->>'timeout_seconds')::numeric <= 300, false) THEN
        RETURN 'IX502 timeout_seconds must be in (0, 300]';
    ELSIF p ? 'concurrency' AND NOT coalesce((p->>'concurrency')::numeric BETWEEN 1 AND 256, false) THEN
        RETURN 'IX502 concurrency must be 1 to 256';
    ELSIF p ? 'tenant_header' AND p->>'tenant_header' !~ '^[A-Za-z0-9-]+$' THEN
        RETURN 'IX502 tenant_header must be a header name';
    ELSIF p ? 'headers' AND jsonb_typeof(p->'headers') <> 'object' THEN
        RETURN 'IX502 headers must be an object of strings';
    END IF;
    SELECT CASE
               WHEN jsonb_typeof(h.value) <> 'string' OR h.key !~ '^[A-Za-z0-9-]+$' OR h.value #>> '{}' ~ '[\x01-\x1f\x7f-\x9f]'
                   THEN 'IX502 header ' || h.key || ' must be a header name with a string value'
               WHEN idem.redrive_reference_problem(h.value #>> '{}') IS NOT NULL
                   THEN 'IX503 header ' || h.key || ': ' || idem.redrive_reference_problem(h.value #>> '{}')
               WHEN h.key ~* '(authorization|cookie|token|secret|key|password|credential)' AND h.value #>> '{}' !~ '^(env|file):.'
                   THEN 'IX503 header ' || h.key || ' carries a credential: give env:IDEMCTL_REDRIVE_NAME or file:PATH, never the value'
           END
    INTO v_bad
    FROM jsonb_each(coalesce(p->'headers', '{}')) h
    WHERE jsonb_typeof(h.value) <> 'string' OR h.key !~ '^[A-Za-z0-9-]+$' OR h.value #>> '{}' ~ '[\x01-\x1f\x7f-\x9f]'
       OR idem.redrive_reference_problem(h.value #>> '{}') IS NOT NULL
       OR (h.key ~* '(authorization|cookie|token|secret|key|password|credential)' AND h.value #>> '{}' !~ '^(env|file):.')
    LIMIT 1;
    RETURN v_bad;
END
$$;
