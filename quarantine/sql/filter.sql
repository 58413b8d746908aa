-- filter.sql: the predicate every quarantine listing shares (list, count,
-- groups, bulk selection), spliced where a query says /*FILTER*/ over
-- idem.quarantine q. Named arguments; NULL means no filter. Run the queries
-- with a custom plan (pgx QueryExecModeExec): the "IS NULL OR" tests then fold
-- away and the planner picks the index of the filters actually given
-- (migrations/001_baseline.sql, 004_quarantine_triage.sql).
--   @status     open, rejected, accepted, or 'all'
--   @tenant     tenant_id
--   @op         operation_id, exact
--   @op_like    operation_id LIKE pattern (a prefix, its % _ \ escaped), byte order
--   @class      the stored or the incoming class
--   @changed    a JSON array of one JSON Pointer (["/amount"]): a differing value there
--   @source     the incoming transport's "source", else its "topic", else ''
--   @since      last_seen >= since
--   @until      last_seen < until
--   @g_class, @g_incoming, @g_fields: one group exactly: the class pair and the
--               JSON array of the differing JSON Pointers, as idem.json_diff
--               lists them (its order is fixed by the payloads' structure, so
--               the same set of pointers is always the same array), found
--               through the class (quarantine_open_class_activity_idx): a
--               group's records are open ones
--   @max_id     id <= max_id (a bulk decision decides what its preview counted)
    (@status::text = 'all' OR q.status = @status::text)
AND (@tenant::text IS NULL OR q.tenant_id = @tenant::text)
AND (@op::text IS NULL OR (q.operation_id COLLATE "C") = @op::text)
AND (@op_like::text IS NULL OR (q.operation_id COLLATE "C") LIKE @op_like::text)
AND (@class::text IS NULL OR q.op_class = @class::text OR q.incoming_class = @class::text)
AND (@changed::jsonb IS NULL OR jsonb_path_query_array(q.diff, '$[*].path') @> @changed::jsonb)
AND (@source::text IS NULL
     OR coalesce(q.incoming_transport ->> 'source', q.incoming_transport ->> 'topic', '') = @source::text)
AND (@since::timestamptz IS NULL OR q.last_seen >= @since::timestamptz)
AND (@until::timestamptz IS NULL OR q.last_seen < @until::timestamptz)
AND (@g_class::text IS NULL
     OR (q.op_class = @g_class::text AND q.incoming_class = @g_incoming::text
         AND jsonb_path_query_array(q.diff, '$[*].path') = @g_fields::jsonb))
AND (@max_id::bigint IS NULL OR q.id <= @max_id::bigint)
