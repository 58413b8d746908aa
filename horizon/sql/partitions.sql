-- The body's partitions that may hold rows before cutoff $1, oldest first
-- (the default partition last), with their size in blocks and the planner's
-- estimate of their rows (-1 when never analyzed): batch sizing only. On
-- Citus the size is the largest shard's (idem.heap_blocks).
SELECT p.part::text, p.lower_bound, p.upper_bound, p.is_default,
       idem.heap_blocks(p.part) AS blocks,
       c.reltuples::float8
FROM idem.inbox_body_partitions() p
JOIN pg_class c ON c.oid = p.part
WHERE p.is_default OR p.lower_bound IS NULL OR p.lower_bound < $1
ORDER BY p.is_default, p.lower_bound NULLS FIRST
