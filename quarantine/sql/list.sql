-- list.sql: quarantine records matching filter.sql, newest activity first
-- (last_seen DESC, id DESC), keyset-paginated on (last_seen, id).
-- @after_seen/@after_id: the cursor (last_seen, id) of the last row of the
-- previous page; @limit: the page size (one more than shown, to know whether
-- another page follows).
SELECT q.id, q.tenant_id, q.operation_id, q.op_class, q.incoming_class, q.status, q.occurrences,
       q.first_seen, q.last_seen, jsonb_array_length(q.diff) AS changes,
       q.decided_at, q.decided_by, q.new_operation_id, q.decided_person, q.decided_db_user,
       CASE q.holds_on WHEN 'body' THEN 'inbox' WHEN 'identity' THEN 'tombstone' ELSE q.holds_on END AS stored_side
FROM idem.quarantine q
WHERE /*FILTER*/
  AND (@after_seen::timestamptz IS NULL OR (q.last_seen, q.id) < (@after_seen::timestamptz, @after_id::bigint))
ORDER BY q.last_seen DESC, q.id DESC
LIMIT @limit::integer
