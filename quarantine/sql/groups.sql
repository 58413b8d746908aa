-- groups.sql: the open records matching filter.sql, grouped by class pair and
-- set of differing JSON Pointers (the array idem.json_diff lists them in, the
-- same for the same set), and by tenant and by source when @by_tenant /
-- @by_source: counts, first and last seen, and the newest record of each as
-- its example, and whether (and when, the latest) a record's stored side was
-- purged. Largest groups first.
WITH m AS (
    SELECT q.id, q.op_class, q.incoming_class, q.first_seen, q.last_seen,
           jsonb_path_query_array(q.diff, '$[*].path') AS fields,
           -- a record whose stored side was purged before the conflict
           -- (idem.record_conflict): its diff says so, and when
           q.diff @> '[{"change": "stored_purged"}]' AS stored_purged,
           (q.diff -> 0 ->> 'purged_at')::timestamptz AS purged_at,
           CASE WHEN @by_tenant::boolean THEN q.tenant_id END AS tenant,
           CASE WHEN @by_source::boolean
                THEN coalesce(q.incoming_transport ->> 'source', q.incoming_transport ->> 'topic', '') END AS source
    FROM idem.quarantine q
    WHERE /*FILTER*/
), g AS (
    SELECT op_class, incoming_class, fields, tenant, source,
           count(*) AS n, min(first_seen) AS first_seen, max(last_seen) AS last_seen, max(id) AS example_id,
           bool_or(stored_purged) AS stored_purged, max(purged_at) FILTER (WHERE stored_purged) AS purged_at
    FROM m
    GROUP BY op_class, incoming_class, fields, tenant, source
)
SELECT g.op_class, g.incoming_class, g.fields, g.tenant, g.source, g.n, g.first_seen, g.last_seen,
       g.example_id, e.tenant_id, e.operation_id, g.stored_purged, g.purged_at
FROM g JOIN idem.quarantine e ON e.id = g.example_id
ORDER BY g.n DESC, g.op_class, g.incoming_class, g.fields, g.tenant, g.source
LIMIT @limit::integer
