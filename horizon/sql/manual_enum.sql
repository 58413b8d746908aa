-- The manual source: every pending correction pins its identity. $1 is the
-- probe run. Returns how many and the oldest.
WITH ins AS (
    INSERT INTO idem.horizon_enum (run_id, source, tenant_id, operation_id, ts)
    SELECT $1, 'manual', tenant_id, operation_id, created_at
    FROM idem.horizon_correction WHERE done_at IS NULL
    RETURNING ts
)
SELECT count(*), min(ts) FROM ins
