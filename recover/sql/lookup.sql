-- Dry-run lookup of a batch of identities in one round trip (steps 2 and 4
-- without writing). Arguments are parallel arrays: $1 tenant_id, $2
-- operation_id, $3 incoming payload hash, $4 class. Only identities that exist
-- come back, as their 1-based position in the arrays; stored_hash and
-- stored_class are NULL when they equal the incoming ones, so a batch of
-- already-applied identities returns little more than numbers, and the
-- comparison needs only columns a covering index can hold (index-only scan).
-- Seam for the Horizon work: tombstones of purged identities will be looked up
-- here too and returned as purged.
SELECT k.ord::int4 AS ord,
       CASE WHEN i.payload_hash = k.payload_hash THEN NULL ELSE i.payload_hash END AS stored_hash,
       CASE WHEN i.op_class = k.op_class THEN NULL ELSE i.op_class END AS stored_class
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[])
         WITH ORDINALITY AS k(tenant_id, operation_id, payload_hash, op_class, ord)
JOIN idem.inbox i ON i.tenant_id = k.tenant_id AND i.operation_id = k.operation_id
