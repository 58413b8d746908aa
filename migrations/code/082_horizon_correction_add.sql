-- object: function idem.horizon_correction_add(text, text, text, text)
-- grant: operator
-- horizon_correction_add records a pending manual correction: an operation
-- someone may still replay by hand. It pins its identity against purges until
-- it is done. Recorded in the audit log.
CREATE OR REPLACE FUNCTION idem.horizon_correction_add(p_tenant_id text, p_operation_id text, p_reason text, p_operator text)
RETURNS idem.horizon_correction
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_problem text := coalesce(idem.identity_problem(p_tenant_id, p_operation_id),
                               idem.text_problem('a reason', p_reason, 4096),
                               idem.text_problem('the operator label', p_operator, 256));
    v_row     idem.horizon_correction;
BEGIN
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'invalid correction: %', v_problem USING ERRCODE = 'IX307';
    END IF;
    INSERT INTO idem.horizon_correction (tenant_id, operation_id, reason, created_by)
    VALUES (p_tenant_id, p_operation_id, p_reason, p_operator)
    RETURNING * INTO v_row;
    PERFORM idem.audit_write(p_operator, 'horizon.correction.add', 'correction:' || v_row.id, to_jsonb(v_row)::text);
    RETURN v_row;
END
$$;
