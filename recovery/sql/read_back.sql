-- After a re-drive: one identity as the primary holds it, read without a
-- lock ($1 tenant, $2 operation id): its hash and class, when it was
-- created (the primary's clock), whether its body is still there, and the
-- saved response; and whether a missing body may only be one this snapshot
-- cannot see (a purge swap committed after it: read again).
SELECT 'jcs-sha256:' || encode(i.payload_digest, 'hex'), i.op_class, i.created_at, b.tenant_id IS NOT NULL, b.response,
       b.tenant_id IS NULL AND idem.snapshot_predates_swap()
FROM idem.identity i
LEFT JOIN idem.inbox_body b ON b.tenant_id = i.tenant_id AND b.operation_id = i.operation_id AND b.created_at = i.created_at
WHERE i.tenant_id = $1 AND i.operation_id = $2
