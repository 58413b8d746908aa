-- object: function idem.redrive_disallow(text)
-- redrive_disallow takes a host off the re-drive allow-list (only the schema
-- owner may call it). Classes configured to it can no longer be re-driven.
-- Recorded in the audit log.
CREATE OR REPLACE FUNCTION idem.redrive_disallow(p_host text)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
BEGIN
    DELETE FROM idem.redrive_host WHERE host = p_host;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'host % is not on the re-drive allow-list', coalesce(quote_literal(p_host), 'NULL')
            USING ERRCODE = 'IX501';
    END IF;
    PERFORM idem.audit_write(session_user, 'redrive.disallow', 'redrive_host:' || p_host,
        jsonb_build_object('host', p_host)::text);
END
$$;
