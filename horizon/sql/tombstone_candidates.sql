-- How many tombstones a drop_tombstones plan $1 (class $2, cutoff $3, min_age
-- $4 seconds) would drop: the predicate of idem.horizon_drop_tombstones_blocks.
SELECT count(*) FROM idem.identity i
WHERE i.op_class = $2 AND i.created_at < $3 AND i.created_at < now() - make_interval(secs => $4::float8)
  AND NOT EXISTS (SELECT 1 FROM idem.inbox_body b
                  WHERE b.tenant_id = i.tenant_id AND b.operation_id = i.operation_id AND b.created_at = i.created_at)
  AND NOT EXISTS (SELECT 1 FROM idem.horizon_pin x
                  WHERE x.plan_id = $1 AND x.tenant_id = i.tenant_id AND x.operation_id = i.operation_id)
  AND NOT EXISTS (SELECT 1 FROM idem.quarantine q
                  WHERE q.tenant_id = i.tenant_id AND q.operation_id = i.operation_id
                    AND q.status IN ('open', 'rejected'))
