-- accept_as_new.sql: the decision "this is a new operation": runs the incoming
-- payload under (tenant_id, $2) through idem.execute, records the decision and
-- its audit row, all in the caller's transaction.
-- $1 id, $2 new operation_id, $3 operator, $4 reason.
SELECT outcome, response, audit_id FROM idem.quarantine_accept_as_new($1, $2, $3, $4)
