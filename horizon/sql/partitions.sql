-- The body's partitions that may hold rows before cutoff $1, oldest first,
-- with their size in blocks (the default partition last).
SELECT p.part::text, p.lower_bound, p.upper_bound, p.is_default,
       (pg_relation_size(p.part) / current_setting('block_size')::int)::bigint AS blocks
FROM idem.inbox_body_partitions() p
WHERE p.is_default OR p.lower_bound IS NULL OR p.lower_bound < $1
ORDER BY p.is_default, p.lower_bound NULLS FIRST
