-- Lookup of a batch of identities in one round trip (steps 2 and 4 without
-- writing): a dry run's answers, and a real run's answers for the identities
-- already there. Arguments are parallel arrays: $1 tenant_id, $2
-- operation_id, $3 incoming payload digest (the 32 bytes of the hash), $4 class; $5 true to return the
-- saved response of an identity holding this payload (a real run). Each identity is one probe
-- of idem.identity by its primary key (the narrow row holding class and
-- payload digest, live or tombstone) and one of idem.inbox_body's primary key
-- for whether the body still exists (absent: purged). Only identities that
-- exist come back, as their 1-based position in the arrays; stored_hash and
-- stored_class are NULL when they equal the incoming ones, so a batch of
-- already-applied identities returns little more than numbers. no_response
-- flags an identity claimed and committed without a saved response, which a
-- real run reports as an error. One statement, one snapshot: a response comes
-- back with the identity it was committed with. stale flags a missing body
-- that this snapshot cannot tell from a kept one (a purge swap committed after
-- it was taken, idem.snapshot_predates_swap): the caller looks up again.
-- entry_plan names the plan that entered an identity without its effect
-- (recorded by hand, or imported: entered_by, read only for those).
SELECT k.ord::int4 AS ord,
       CASE WHEN i.payload_digest = k.digest THEN NULL
            ELSE 'jcs-sha256:' || encode(i.payload_digest, 'hex') END AS stored_hash,
       CASE WHEN i.op_class = k.op_class THEN NULL ELSE i.op_class END AS stored_class,
       b.tenant_id IS NOT NULL AND b.response IS NULL AS no_response,
       b.tenant_id IS NULL AS purged,
       b.tenant_id IS NULL AND idem.snapshot_predates_swap() AS stale,
       CASE WHEN $5 AND i.payload_digest = k.digest AND i.op_class = k.op_class
            THEN b.response END AS response,
       i.entry_plan,
       CASE WHEN i.entry_plan IS NOT NULL THEN b.transport ->> 'entered_by' END AS entered_by
FROM unnest($1::text[], $2::text[], $3::bytea[], $4::text[])
         WITH ORDINALITY AS k(tenant_id, operation_id, digest, op_class, ord)
JOIN idem.identity i ON i.tenant_id = k.tenant_id AND i.operation_id = k.operation_id
LEFT JOIN idem.inbox_body b
       ON b.tenant_id = i.tenant_id AND b.operation_id = i.operation_id AND b.created_at = i.created_at
