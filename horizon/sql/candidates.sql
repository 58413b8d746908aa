-- How many body rows plan $1 (class $2, cutoff $3, min_age $4 seconds) would
-- purge now: the same predicate as idem.horizon_purge_blocks.
SELECT count(*) FROM idem.inbox_body b
WHERE b.op_class = $2 AND b.created_at < $3 AND b.created_at < now() - make_interval(secs => $4::float8)
  AND NOT EXISTS (SELECT 1 FROM idem.horizon_pin x
                  WHERE x.plan_id = $1 AND x.tenant_id = b.tenant_id AND x.operation_id = b.operation_id)
  AND NOT EXISTS (SELECT 1 FROM idem.quarantine q
                  WHERE q.tenant_id = b.tenant_id AND q.operation_id = b.operation_id
                    AND q.status IN ('open', 'rejected'))
