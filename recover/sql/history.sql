-- One identity's story ($1 tenant, $2 operation), oldest first: applied (with
-- its transport while the body is kept), each conflict and its decision,
-- manual corrections, the purge that removed its body; each with the audit
-- row that records it, when one does. Resolve runs are recorded per run
-- (resolve.start, resolve.run), not per identity: a run's --report names its
-- identities.
SELECT at, event, detail, audit_id FROM (
    SELECT i.created_at AS at, 1 AS ord, 'applied' AS event,
           format('class %s, hash jcs-sha256:%s%s', i.op_class, encode(i.payload_digest, 'hex'),
                  CASE WHEN b.tenant_id IS NULL THEN ', body purged'
                       ELSE coalesce(', transport ' || b.transport::text, ', no transport') END) AS detail,
           NULL::bigint AS audit_id
    FROM idem.identity i
    LEFT JOIN idem.inbox_body b
           ON b.tenant_id = i.tenant_id AND b.operation_id = i.operation_id AND b.created_at = i.created_at
    WHERE i.tenant_id = $1 AND i.operation_id = $2
    UNION ALL
    SELECT q.first_seen, 2, 'conflict',
           format('quarantine id %s: incoming %s (class %s), %s occurrence(s), last seen %s%s', q.id, q.incoming_hash,
                  q.incoming_class, q.occurrences, q.last_seen, coalesce(', transport ' || q.incoming_transport::text, '')),
           NULL
    FROM idem.quarantine q WHERE q.tenant_id = $1 AND q.operation_id = $2
    UNION ALL
    SELECT q.decided_at, 3, 'decision',
           format('quarantine id %s %s by %s (person %s): %s', q.id, q.status, q.decided_by, q.decided_person, q.decision_reason)
               || CASE WHEN q.new_operation_id IS NULL THEN ''
                       ELSE format(', as operation %s (%s)', q.new_operation_id, q.new_outcome) END,
           q.decision_audit_id
    FROM idem.quarantine q WHERE q.tenant_id = $1 AND q.operation_id = $2 AND q.decided_at IS NOT NULL
    UNION ALL
    SELECT c.created_at, 4, 'correction',
           format('correction id %s pending: %s (by %s)', c.id, c.reason, c.created_by),
           (SELECT a.id FROM idem.audit a WHERE a.target = 'correction:' || c.id AND a.action = 'horizon.correction.add')
    FROM idem.horizon_correction c WHERE c.tenant_id = $1 AND c.operation_id = $2
    UNION ALL
    SELECT c.done_at, 5, 'correction done', format('correction id %s done by %s', c.id, c.done_by),
           (SELECT a.id FROM idem.audit a WHERE a.target = 'correction:' || c.id AND a.action = 'horizon.correction.done')
    FROM idem.horizon_correction c WHERE c.tenant_id = $1 AND c.operation_id = $2 AND c.done_at IS NOT NULL
    UNION ALL
    SELECT t.purged_at, 6, 'purged',
           format('body removed by purge plan %s; the identity stays as a tombstone (a replay is answered purged)', t.purge_plan),
           (SELECT a.id FROM idem.audit a WHERE a.target = 'horizon_plan:' || t.purge_plan AND a.action = 'horizon.purge.start')
    FROM idem.tombstone t WHERE t.tenant_id = $1 AND t.operation_id = $2
) e
ORDER BY at, ord
