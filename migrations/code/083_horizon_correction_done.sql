-- object: function idem.horizon_correction_done(bigint, text)
-- grant: operator
-- horizon_correction_done marks a pending correction applied: it no longer
-- pins (IX309 when it is unknown or already done). Recorded in the audit log.
CREATE OR REPLACE FUNCTION idem.horizon_correction_done(p_id bigint, p_operator text)
RETURNS idem.horizon_correction
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_row     idem.horizon_correction;
BEGIN
    PERFORM idem.check_operator(p_operator, 'finish correction');
    UPDATE idem.horizon_correction SET done_at = now(), done_by = p_operator
    WHERE id = p_id AND done_at IS NULL
    RETURNING * INTO v_row;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no pending correction %', coalesce(p_id::text, 'NULL')
            USING ERRCODE = 'IX309', HINT = 'idemctl corrections list shows the pending ones';
    END IF;
    PERFORM idem.audit_write(p_operator, 'horizon.correction.done', 'correction:' || v_row.id, to_jsonb(v_row)::text);
    RETURN v_row;
END
$$;
