-- Pins of plan $1 held by the quarantine: identities of class $2 created
-- before the cutoff $3 with an open or rejected record (a replay of a rejected
-- payload must keep meeting its record, never a missing identity).
INSERT INTO idem.horizon_pin (plan_id, tenant_id, operation_id, source)
SELECT DISTINCT $1::bigint, q.tenant_id, q.operation_id, 'quarantine'
FROM idem.quarantine q
JOIN idem.identity i ON i.tenant_id = q.tenant_id AND i.operation_id = q.operation_id
WHERE q.status IN ('open', 'rejected') AND i.op_class = $2 AND i.created_at < $3
ON CONFLICT DO NOTHING
