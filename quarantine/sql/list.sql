-- list.sql: quarantine records, newest activity first (last_seen DESC, id DESC),
-- keyset-paginated on (last_seen, id).
-- $1 status ('all' for every status), $2 tenant_id, $3 class (stored or
-- incoming), $4 last_seen >= since, $5/$6 cursor (last_seen, id) of the last
-- row of the previous page, $7 limit.
-- NULL means no filter. Run it with a custom plan (pgx QueryExecModeExec): the
-- "IS NULL OR" tests then fold away and the planner picks the index for the
-- filters actually given (quarantine_*_activity_idx, quarantine_last_seen_idx).
SELECT id, tenant_id, operation_id, op_class, incoming_class, status, occurrences,
       first_seen, last_seen, jsonb_array_length(diff) AS changes,
       decided_at, decided_by, new_operation_id
FROM idem.quarantine
WHERE ($1::text = 'all' OR status = $1)
  AND ($2::text IS NULL OR tenant_id = $2)
  AND ($3::text IS NULL OR op_class = $3 OR incoming_class = $3)
  AND ($4::timestamptz IS NULL OR last_seen >= $4)
  AND ($5::timestamptz IS NULL OR (last_seen, id) < ($5, $6::bigint))
ORDER BY last_seen DESC, id DESC
LIMIT $7
