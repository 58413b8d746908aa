-- Pins of plan $1 from probe run $2: identities of class $3 created before the
-- cutoff $4 that a source enumerated (the first source to name one keeps it).
INSERT INTO idem.horizon_pin (plan_id, tenant_id, operation_id, source)
SELECT DISTINCT ON (i.tenant_id, i.operation_id) $1, i.tenant_id, i.operation_id, e.source
FROM idem.horizon_enum e
JOIN idem.identity i ON i.tenant_id = e.tenant_id AND i.operation_id = e.operation_id
WHERE e.run_id = $2 AND i.op_class = $3 AND i.created_at < $4
ORDER BY i.tenant_id, i.operation_id, e.source
ON CONFLICT DO NOTHING
