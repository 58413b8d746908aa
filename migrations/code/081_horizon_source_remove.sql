-- object: function idem.horizon_source_remove(text, text)
-- grant: operator
-- horizon_source_remove forgets a replay source (IX308 when there is none).
-- Recorded in the audit log. A plan whose proof named it is aborted by its
-- purge's re-probe.
CREATE OR REPLACE FUNCTION idem.horizon_source_remove(p_name text, p_operator text)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_row     idem.horizon_source;
BEGIN
    PERFORM idem.check_operator(p_operator, 'remove source');
    DELETE FROM idem.horizon_source WHERE name = p_name RETURNING * INTO v_row;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no source %', coalesce(quote_literal(p_name), 'NULL')
            USING ERRCODE = 'IX308', HINT = 'idemctl horizon source list shows them';
    END IF;
    PERFORM idem.audit_write(p_operator, 'horizon.source.remove', 'horizon_source:' || p_name,
        jsonb_build_object('name', p_name, 'kind', v_row.kind, 'config', v_row.config)::text);
END
$$;
