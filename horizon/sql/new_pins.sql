-- Identities a re-probe (run $2) enumerates inside plan $1's purge set that
-- the plan did not pin: still purgeable (body present, or a tombstone for a
-- drop_tombstones plan), of its class, before its cutoff. Up to $3 examples.
SELECT e.source, e.tenant_id, e.operation_id
FROM idem.horizon_enum e
JOIN idem.horizon_plan p ON p.id = $1
JOIN idem.identity i ON i.tenant_id = e.tenant_id AND i.operation_id = e.operation_id
WHERE e.run_id = $2 AND i.op_class = p.op_class AND i.created_at < p.cutoff
  AND NOT EXISTS (SELECT 1 FROM idem.horizon_pin x
                  WHERE x.plan_id = p.id AND x.tenant_id = i.tenant_id AND x.operation_id = i.operation_id)
  AND (p.action = 'drop_tombstones'
       OR EXISTS (SELECT 1 FROM idem.inbox_body b
                  WHERE b.tenant_id = i.tenant_id AND b.operation_id = i.operation_id AND b.created_at = i.created_at))
ORDER BY e.source, e.tenant_id, e.operation_id
LIMIT $3
