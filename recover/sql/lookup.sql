-- Dry-run lookup of a batch of identities in one round trip (steps 2 and 4
-- without writing). Arguments are parallel arrays: $1 tenant_id, $2
-- operation_id, $3 incoming payload hash, $4 class. Each identity is a probe
-- of idem.inbox by its key (idem.identity's primary key, then the body row of
-- idem.inbox_body by its primary key); there is no covering index, the rows
-- themselves are read. Only identities that exist come back, as their
-- 1-based position in the arrays; stored_hash and stored_class are NULL when
-- they equal the incoming ones, so a batch of already-applied identities
-- returns little more than numbers. no_response flags an identity claimed and
-- committed without a saved response, which a real run reports as an error.
-- Seam for the Horizon work: tombstones of purged identities (no body row)
-- are not seen here yet.
SELECT k.ord::int4 AS ord,
       CASE WHEN i.payload_hash = k.payload_hash THEN NULL ELSE i.payload_hash END AS stored_hash,
       CASE WHEN i.op_class = k.op_class THEN NULL ELSE i.op_class END AS stored_class,
       i.response IS NULL AS no_response
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[])
         WITH ORDINALITY AS k(tenant_id, operation_id, payload_hash, op_class, ord)
JOIN idem.inbox i ON i.tenant_id = k.tenant_id AND i.operation_id = k.operation_id
