-- show.sql: the whole evidence of one record and its decision. $1 id.
SELECT id, tenant_id, operation_id, op_class, incoming_class, status, occurrences, first_seen, last_seen,
       CASE holds_on WHEN 'body' THEN 'inbox' WHEN 'identity' THEN 'tombstone' ELSE holds_on END,
       coalesce(stored_hash, ''), stored_payload, stored_response,
       incoming_hash, incoming_payload, incoming_transport,
       diff, detected_app, detected_user, detected_operator,
       decided_at, decided_by, decided_person, decided_db_user, decision_reason, new_operation_id, new_outcome,
       decision_audit_id
FROM idem.quarantine
WHERE id = $1
