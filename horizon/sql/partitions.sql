-- The body's partitions that may hold rows before cutoff $1, oldest first
-- (the default partition last), with their size in blocks and the planner's
-- estimate of their rows (-1 when never analyzed): batch sizing only.
SELECT p.part::text, p.lower_bound, p.upper_bound, p.is_default,
       (pg_relation_size(p.part) / current_setting('block_size')::int)::bigint AS blocks,
       c.reltuples::float8
FROM idem.inbox_body_partitions() p
JOIN pg_class c ON c.oid = p.part
WHERE p.is_default OR p.lower_bound IS NULL OR p.lower_bound < $1
ORDER BY p.is_default, p.lower_bound NULLS FIRST
