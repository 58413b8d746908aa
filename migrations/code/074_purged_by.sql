-- object: function idem.purged_by(text, text, text, timestamptz)
-- grant: operator, auditor
-- purged_by names the purge that removed an identity's body: the first plan of
-- its class, by purge start, whose cutoff lies after it and that did not pin it.
-- PL/pgSQL, not SQL: Citus cannot plan a SQL function's statements that use
-- its parameters on its tables.
CREATE OR REPLACE FUNCTION idem.purged_by(p_tenant_id text, p_operation_id text, p_op_class text, p_created_at timestamptz)
RETURNS idem.horizon_plan
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_p idem.horizon_plan;
BEGIN
    SELECT p.* INTO v_p FROM idem.horizon_plan p
    WHERE p.op_class = p_op_class AND p.action = 'purge' AND p.purge_started_at IS NOT NULL
      AND p_created_at < p.cutoff
      AND NOT EXISTS (SELECT 1 FROM idem.horizon_pin x
                      WHERE x.plan_id = p.id AND x.tenant_id = p_tenant_id AND x.operation_id = p_operation_id)
    ORDER BY p.purge_started_at, p.id
    LIMIT 1;
    RETURN v_p;
END
$$;
