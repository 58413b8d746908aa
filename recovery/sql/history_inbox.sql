-- One identity's story, the part held with its tenant's rows ($1 tenant, $2
-- operation): applied, or recorded by hand / imported under an entry plan
-- (with its transport while the body is kept), each
-- conflict and its decision. An identity entered by a plan names the plan's
-- run as its audit row (recovery.History looks it up by target and action;
-- an import writes no item row for what it entered). On Citus these tables are co-located by tenant:
-- one node answers. The other parts are history_local.sql and
-- history_purge.sql (a distributed table and a coordinator table cannot be
-- read by one statement there); recovery.History merges them.
SELECT at, ord, event, detail, audit_id, audit_target, audit_action FROM (
    SELECT i.created_at AS at, 1 AS ord,
           CASE WHEN i.entry_plan IS NULL THEN 'applied'
                WHEN b.transport ->> 'entered_by' = 'import' THEN 'imported'
                ELSE 'recorded by hand' END AS event,
           format('class %s, hash jcs-sha256:%s%s%s', i.op_class, encode(i.payload_digest, 'hex'),
                  CASE WHEN i.entry_plan IS NULL THEN '' ELSE format(', entry plan %s, its effect not run', i.entry_plan) END,
                  CASE WHEN b.tenant_id IS NULL THEN ', body purged'
                       ELSE coalesce(', transport ' || b.transport::text, ', no transport') END) AS detail,
           NULL::bigint AS audit_id, 'entry_plan:' || i.entry_plan AS audit_target,
           CASE WHEN i.entry_plan IS NOT NULL THEN 'entry.run' END AS audit_action
    FROM idem.identity i
    LEFT JOIN idem.inbox_body b
           ON b.tenant_id = i.tenant_id AND b.operation_id = i.operation_id AND b.created_at = i.created_at
    WHERE i.tenant_id = $1 AND i.operation_id = $2
    UNION ALL
    SELECT q.first_seen, 2, CASE q.holds_on WHEN 'provider' THEN 'provider refused' ELSE 'conflict' END,
           format('quarantine id %s: incoming %s (class %s), %s occurrence(s), last seen %s%s', q.id, q.incoming_hash,
                  q.incoming_class, q.occurrences, q.last_seen, coalesce(', transport ' || q.incoming_transport::text, ''))
               || CASE WHEN q.holds_on = 'provider'
                       THEN format('; the provider answered %s (the key was used there with another payload; nothing here holds it)',
                                   q.stored_response ->> 'status')
                       ELSE '' END,
           NULL, NULL, NULL
    FROM idem.quarantine q WHERE q.tenant_id = $1 AND q.operation_id = $2
    UNION ALL
    SELECT q.decided_at, 3, 'decision',
           format('quarantine id %s %s by %s (operator %s): %s', q.id, q.status,
                  -- who decided, as audit.Who shows it: the person, then the login
                  CASE WHEN coalesce(q.decided_person, '') = '' THEN '(no person) ' || q.decided_db_user
                       ELSE q.decided_person || ' (' || q.decided_db_user || ')' END,
                  q.decided_by, q.decision_reason)
               || CASE WHEN q.new_operation_id IS NULL THEN ''
                       ELSE format(', as operation %s (%s)', q.new_operation_id, q.new_outcome) END,
           q.decision_audit_id, NULL, NULL
    FROM idem.quarantine q WHERE q.tenant_id = $1 AND q.operation_id = $2 AND q.decided_at IS NOT NULL
) e
