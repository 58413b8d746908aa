-- bulk_accept_run.sql: the next batch of an approved plan (each record runs
-- once under the rule's new id, with its own audit row).
-- $1 plan id, $2 operator, $3 batch size.
SELECT id, outcome, new_operation_id, audit_id FROM idem.quarantine_bulk_accept_run($1, $2, $3)
