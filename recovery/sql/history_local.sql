-- One identity's manual corrections and the entry plan it entered by
-- without its effect ($1 tenant, $2 operation); the audit row of each is
-- looked up by its target and action (recovery.History). Who is a person
-- and a login, never an --operator label alone: a correction's adder from
-- its audit row, and its marking done (a governed change, correction_done)
-- by the change's two persons.
SELECT c.created_at AS at, 4 AS ord, 'correction' AS event,
       format('correction id %s pending: %s (added by %s)', c.id, c.reason,
              CASE WHEN a.db_user IS NULL THEN c.created_by
                   WHEN a.person = '' THEN '(no person) ' || a.db_user
                   ELSE a.person || ' (' || a.db_user || ')' END) AS detail,
       NULL::bigint AS audit_id, 'correction:' || c.id AS audit_target, 'horizon.correction.add' AS audit_action
FROM idem.horizon_correction c
LEFT JOIN LATERAL (SELECT x.person, x.db_user FROM idem.audit x
                   WHERE x.target = 'correction:' || c.id AND x.action = 'horizon.correction.add'
                   ORDER BY x.id LIMIT 1) a ON true
WHERE c.tenant_id = $1 AND c.operation_id = $2
UNION ALL
SELECT c.done_at, 5, 'correction done',
       CASE WHEN g.id IS NULL
            THEN format('correction id %s done by %s (its --operator label: marked before that needed a second person)', c.id, c.done_by)
            ELSE format('correction id %s done: marked by %s (%s), approved by %s (%s), change %s',
                        c.id, g.planned_person, g.planned_db_user, g.approved_person, g.approved_db_user, g.id) END,
       NULL, 'correction:' || c.id, 'horizon.correction.done'
FROM idem.horizon_correction c
LEFT JOIN LATERAL (SELECT * FROM idem.governed_change x
                   WHERE x.kind = 'correction_done' AND x.target = c.id::text AND x.state = 'approved'
                   ORDER BY x.id DESC LIMIT 1) g ON true
WHERE c.tenant_id = $1 AND c.operation_id = $2 AND c.done_at IS NOT NULL
UNION ALL
SELECT p.finished_at, 2, 'entry plan',
       format('%s under entry plan %s: planned by %s (%s), approved by %s (%s), evidence %s; reason: %s', p.kind, p.id,
              p.planned_person, p.planned_db_user, p.approved_person, p.approved_db_user, it.evidence, p.reason),
       NULL, 'entry_plan:' || p.id, 'entry.run'
FROM idem.entry_item it JOIN idem.entry_plan p ON p.id = it.plan_id
WHERE it.tenant_id = $1 AND it.operation_id = $2 AND it.outcome = 'entered'
