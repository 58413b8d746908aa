-- The live operations of one class created in [$2, $3), of the one tenant $4
-- when the report is one tenant's (--tenant; NULL: every tenant), in identity order
-- under the "C" collation (bytes: the order Go compares strings in, which
-- the report's sorted lines are merged with), read by reconcile through this
-- cursor in batches (FETCH), inside one read-only transaction. Only
-- idem.inbox_body is read: it holds the identity, the class, the canonical
-- payload text and the transport of every live operation, and its day
-- partitions are pruned by the window. Purged operations (tombstones) have
-- no body and are not listed.
DECLARE reconcile_inbox NO SCROLL CURSOR FOR
SELECT tenant_id, operation_id, payload, created_at, transport
FROM idem.inbox_body
WHERE op_class = $1 AND created_at >= $2 AND created_at < $3
  AND ($4::text IS NULL OR tenant_id = $4::text)
ORDER BY tenant_id COLLATE "C", operation_id COLLATE "C"
