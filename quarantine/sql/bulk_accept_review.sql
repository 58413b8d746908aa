-- bulk_accept_review.sql: what an accept-as-new plan runs, record by record:
-- the differing fields (as idem.json_diff computed them at conflict time),
-- whether the stored body had been purged, the incoming payload that runs,
-- and its class's money declaration. $1 the plan's record ids.
SELECT q.id, q.tenant_id, q.operation_id, q.incoming_class, q.status, q.stored_payload IS NULL, q.diff,
       q.incoming_payload, c.money
FROM idem.quarantine q
LEFT JOIN idem.op_class c ON c.name = q.incoming_class
WHERE q.id = ANY($1)
ORDER BY q.id
