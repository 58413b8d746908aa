-- A stage of the batched lookup (recovery/sql/lookup.sql), for
-- BenchmarkLookupServerCPU: the arrays decoded and unnested, nothing probed.
SELECT k.ord::int4 AS ord
FROM unnest($1::text[], $2::text[], $3::bytea[], $4::text[])
         WITH ORDINALITY AS k(tenant_id, operation_id, digest, op_class, ord)
WHERE k.ord < 0 AND $5
