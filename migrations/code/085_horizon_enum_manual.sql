-- object: function idem.horizon_enum_manual(uuid)
-- grant: operator
-- horizon_enum_manual is the built-in manual source: every pending correction
-- pins its identity in probe run p_run. Returns how many and the oldest.
-- PL/pgSQL, not SQL: Citus cannot plan a SQL function's statements that use
-- its parameters on its tables.
CREATE OR REPLACE FUNCTION idem.horizon_enum_manual(p_run uuid, OUT pinned bigint, OUT oldest timestamptz)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
BEGIN
    WITH ins AS (
        INSERT INTO idem.horizon_enum (run_id, source, tenant_id, operation_id, ts)
        SELECT p_run, 'manual', tenant_id, operation_id, created_at
        FROM idem.horizon_correction WHERE done_at IS NULL
        RETURNING ts
    )
    SELECT count(*), min(ts) INTO pinned, oldest FROM ins;
END
$$;
