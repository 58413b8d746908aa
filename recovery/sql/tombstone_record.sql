-- What remains of a purged identity ($1 tenant, $2 operation): its tombstone.
SELECT op_class, payload_hash, created_at, purge_plan, purged_at
FROM idem.tombstone WHERE tenant_id = $1 AND operation_id = $2
