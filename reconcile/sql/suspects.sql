-- Suspects: operations of one tenant and one class whose canonical payloads
-- are the same (the same payload_digest) and whose identities were created
-- within $3 of each other: the trace of a client that gives every retry a
-- new operation id. $1 is the start (created_at at or after), $2 the
-- classes (NULL: every class), $4 the classes left out; a class declared
-- to repeat its payloads (op_class.payloads_repeat) is left out unless $2
-- names it. Only rows with a
-- neighbour within the window come back, in group order; the caller splits
-- a key's rows where the gap exceeds the window. One pass over
-- idem.identity since $1 (no index on created_at: a sequential scan, see
-- BENCHMARKS.md), sorted by the window's partition.
SELECT tenant_id, op_class, 'jcs-sha256:' || encode(payload_digest, 'hex') AS payload_hash, operation_id, created_at
FROM (
    SELECT tenant_id, op_class, payload_digest, operation_id, created_at,
           lag(created_at) OVER g AS prev_at,
           lead(created_at) OVER g AS next_at
    FROM idem.identity
    WHERE created_at >= $1
      AND ($2::text[] IS NULL OR op_class = ANY ($2::text[]))
      AND NOT (op_class = ANY ($4::text[]))
      AND ($2::text[] IS NOT NULL
           OR op_class NOT IN (SELECT c.name FROM idem.op_class c WHERE c.payloads_repeat))
    WINDOW g AS (PARTITION BY tenant_id, op_class, payload_digest ORDER BY created_at, operation_id)
) w
WHERE created_at - prev_at <= $3::interval OR next_at - created_at <= $3::interval
ORDER BY tenant_id, op_class, payload_digest, created_at, operation_id
