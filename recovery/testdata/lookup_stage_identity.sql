-- A stage of the batched lookup (recovery/sql/lookup.sql), for
-- BenchmarkLookupServerCPU: the arrays unnested and idem.identity probed by
-- its primary key (heap row included), the body not probed.
SELECT k.ord::int4 AS ord,
       CASE WHEN i.payload_digest = k.digest THEN NULL
            ELSE 'jcs-sha256:' || encode(i.payload_digest, 'hex') END AS stored_hash,
       CASE WHEN i.op_class = k.op_class THEN NULL ELSE i.op_class END AS stored_class,
       i.created_at
FROM unnest($1::text[], $2::text[], $3::bytea[], $4::text[])
         WITH ORDINALITY AS k(tenant_id, operation_id, digest, op_class, ord)
JOIN idem.identity i ON i.tenant_id = k.tenant_id AND i.operation_id = k.operation_id
WHERE NOT $5
