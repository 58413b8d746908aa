-- Batch lookup of identities, in one round trip: the report lines of
-- reconcile whose identity is not among the window's operations, and the
-- messages of intake. Arguments are parallel arrays, $1 tenant_id and $2
-- operation_id; $3 says whether to return the payload and the transport.
-- Each identity is one probe of idem.identity by its primary key (live or
-- tombstone) and one of idem.inbox_body's. Only identities that exist come
-- back, as their 1-based position in the arrays; purged is true when only
-- the tombstone is left (no body: no payload to compare).
SELECT k.ord::int4 AS ord,
       i.op_class,
       i.created_at,
       'jcs-sha256:' || encode(i.payload_digest, 'hex') AS payload_hash,
       b.tenant_id IS NULL AS purged,
       CASE WHEN $3 THEN b.payload END AS payload,
       CASE WHEN $3 THEN b.transport END AS transport
FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS k(tenant_id, operation_id, ord)
JOIN idem.identity i ON i.tenant_id = k.tenant_id AND i.operation_id = k.operation_id
LEFT JOIN idem.inbox_body b
       ON b.tenant_id = i.tenant_id AND b.operation_id = i.operation_id AND b.created_at = i.created_at
