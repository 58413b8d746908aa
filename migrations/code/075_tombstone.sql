-- object: view idem.tombstone
-- grant: operator, auditor
-- tombstone: identities whose body a purge removed: neither payload nor
-- response, they are gone; the plan that purged them and when: the first
-- plan of its class, by purge start, whose cutoff lies after it and that did
-- not pin it (what idem.purged_by answers for one identity). Written as joins
-- on the plans rather than a call of idem.purged_by: on Citus a view that
-- reaches the plan table back through a function's result type is a circular
-- dependency, and joins with a reference table run on every shard.
CREATE OR REPLACE VIEW idem.tombstone AS
SELECT i.tenant_id, i.operation_id,
       'jcs-sha256:' || encode(i.payload_digest, 'hex') AS payload_hash,
       i.op_class, i.created_at, p.id AS purge_plan, p.purge_started_at AS purged_at
FROM idem.identity i
JOIN idem.horizon_plan p
  ON p.op_class = i.op_class AND p.action = 'purge' AND p.purge_started_at IS NOT NULL AND i.created_at < p.cutoff
WHERE NOT EXISTS (SELECT 1 FROM idem.horizon_pin x
                  WHERE x.plan_id = p.id AND x.tenant_id = i.tenant_id AND x.operation_id = i.operation_id)
  AND NOT EXISTS (SELECT 1 FROM idem.horizon_plan e
                  WHERE e.op_class = i.op_class AND e.action = 'purge' AND e.purge_started_at IS NOT NULL
                    AND i.created_at < e.cutoff
                    AND (e.purge_started_at, e.id) < (p.purge_started_at, p.id)
                    AND NOT EXISTS (SELECT 1 FROM idem.horizon_pin y
                                    WHERE y.plan_id = e.id AND y.tenant_id = i.tenant_id AND y.operation_id = i.operation_id))
  AND NOT EXISTS (SELECT 1 FROM idem.inbox_body b
                  WHERE b.tenant_id = i.tenant_id AND b.operation_id = i.operation_id AND b.created_at = i.created_at);
