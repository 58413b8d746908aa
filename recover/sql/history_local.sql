-- One identity's manual corrections ($1 tenant, $2 operation); the audit row
-- of each is looked up by its target and action (recovery.History).
SELECT c.created_at AS at, 4 AS ord, 'correction' AS event,
       format('correction id %s pending: %s (by %s)', c.id, c.reason, c.created_by) AS detail,
       NULL::bigint AS audit_id, 'correction:' || c.id AS audit_target, 'horizon.correction.add' AS audit_action
FROM idem.horizon_correction c WHERE c.tenant_id = $1 AND c.operation_id = $2
UNION ALL
SELECT c.done_at, 5, 'correction done', format('correction id %s done by %s', c.id, c.done_by),
       NULL, 'correction:' || c.id, 'horizon.correction.done'
FROM idem.horizon_correction c WHERE c.tenant_id = $1 AND c.operation_id = $2 AND c.done_at IS NOT NULL
