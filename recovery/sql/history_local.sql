-- One identity's manual corrections and the entry plan it entered by
-- without its effect ($1 tenant, $2 operation); the audit row of each is
-- looked up by its target and action (recovery.History).
SELECT c.created_at AS at, 4 AS ord, 'correction' AS event,
       format('correction id %s pending: %s (by %s)', c.id, c.reason, c.created_by) AS detail,
       NULL::bigint AS audit_id, 'correction:' || c.id AS audit_target, 'horizon.correction.add' AS audit_action
FROM idem.horizon_correction c WHERE c.tenant_id = $1 AND c.operation_id = $2
UNION ALL
SELECT c.done_at, 5, 'correction done', format('correction id %s done by %s', c.id, c.done_by),
       NULL, 'correction:' || c.id, 'horizon.correction.done'
FROM idem.horizon_correction c WHERE c.tenant_id = $1 AND c.operation_id = $2 AND c.done_at IS NOT NULL
UNION ALL
SELECT p.finished_at, 2, 'entry plan',
       format('%s under entry plan %s: planned by %s (%s), approved by %s (%s), evidence %s; reason: %s', p.kind, p.id,
              p.planned_person, p.planned_db_user, p.approved_person, p.approved_db_user, it.evidence, p.reason),
       NULL, 'entry_plan:' || p.id, 'entry.run'
FROM idem.entry_item it JOIN idem.entry_plan p ON p.id = it.plan_id
WHERE it.tenant_id = $1 AND it.operation_id = $2 AND it.outcome = 'entered'
