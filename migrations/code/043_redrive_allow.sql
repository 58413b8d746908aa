-- object: function idem.redrive_allow(text)
-- redrive_allow puts a host on the re-drive allow-list (only the schema owner
-- may call it). Recorded in the audit log.
CREATE OR REPLACE FUNCTION idem.redrive_allow(p_host text)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
BEGIN
    IF p_host IS NULL OR p_host !~ '^([a-z0-9]([a-z0-9.-]*[a-z0-9])?|[0-9a-f.]*:[0-9a-f:.]*)$' OR octet_length(p_host) > 253 THEN
        RAISE EXCEPTION 'invalid re-drive host %: a lower-case host name or address (an IPv6 address without brackets)', coalesce(quote_literal(p_host), 'NULL')
            USING ERRCODE = 'IX501';
    END IF;
    INSERT INTO idem.redrive_host (host, created_by) VALUES (p_host, session_user) ON CONFLICT DO NOTHING;
    IF FOUND THEN
        PERFORM idem.audit_write(session_user, 'redrive.allow', 'redrive_host:' || p_host,
            jsonb_build_object('host', p_host)::text);
    END IF;
END
$$;
