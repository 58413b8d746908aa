-- object: function idem.horizon_candidates(idem.horizon_plan)
-- grant: operator, auditor
-- horizon_candidates counts what plan p would remove now: body rows of its
-- class before its cutoff, older than its min-age, not pinned and not held by
-- quarantine evidence (holds = 0); for a drop_tombstones plan, the same
-- tombstones (identities without a body). The purge functions delete by the
-- same predicate.
-- PL/pgSQL, not SQL: Citus cannot plan a SQL function's statements that use
-- its parameters on its tables.
CREATE OR REPLACE FUNCTION idem.horizon_candidates(p idem.horizon_plan)
RETURNS bigint
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_n     bigint;
    v_young timestamptz := now() - coalesce(p.min_age, interval '0');
BEGIN
    IF p.action = 'purge' THEN
        SELECT count(*) INTO v_n FROM idem.inbox_body b
        WHERE b.op_class = p.op_class AND b.created_at < p.cutoff
          AND b.created_at < v_young AND b.holds = 0
          AND NOT EXISTS (SELECT 1 FROM idem.horizon_pin x
                          WHERE x.plan_id = p.id AND x.tenant_id = b.tenant_id AND x.operation_id = b.operation_id);
    ELSE
        SELECT count(*) INTO v_n FROM idem.identity i
        WHERE i.op_class = p.op_class AND i.created_at < p.cutoff
          AND i.created_at < v_young AND i.holds = 0
          AND NOT EXISTS (SELECT 1 FROM idem.inbox_body b
                          WHERE b.tenant_id = i.tenant_id AND b.operation_id = i.operation_id AND b.created_at = i.created_at)
          AND NOT EXISTS (SELECT 1 FROM idem.horizon_pin x
                          WHERE x.plan_id = p.id AND x.tenant_id = i.tenant_id AND x.operation_id = i.operation_id);
    END IF;
    RETURN v_n;
END
$$;
