-- reject_batch.sql: one batch of a bulk reject (idem.quarantine_reject_batch
-- decides each open record with its own audit row, and reports the others).
-- $1 ids, $2 operator, $3 reason, $4 the run's label.
SELECT id, outcome, audit_id FROM idem.quarantine_reject_batch($1, $2, $3, $4)
