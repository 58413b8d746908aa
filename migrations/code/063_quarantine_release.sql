-- object: function idem.quarantine_release(idem.quarantine)
-- quarantine_release gives back the hold an open record had on the stored
-- side (body or tombstone) once it is accepted: the evidence it protected may
-- be purged again like any other. A rejected record keeps its hold for ever.
-- A record of a provider's answer (holds_on 'provider') holds nothing.
CREATE OR REPLACE FUNCTION idem.quarantine_release(p_q idem.quarantine)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
BEGIN
    IF p_q.holds_on = 'identity' THEN
        UPDATE idem.identity i SET holds = i.holds - 1
        WHERE i.tenant_id = p_q.tenant_id AND i.operation_id = p_q.operation_id AND i.holds > 0;
    ELSIF p_q.holds_on = 'body' THEN
        UPDATE idem.inbox_body b SET holds = b.holds - 1
        FROM idem.identity i
        WHERE i.tenant_id = p_q.tenant_id AND i.operation_id = p_q.operation_id
          AND b.tenant_id = i.tenant_id AND b.operation_id = i.operation_id AND b.created_at = i.created_at
          AND b.holds > 0;
    END IF;
END
$$;
