-- reject.sql: the decision "never run this" (idem.quarantine_reject locks the
-- record, refuses a decided one, records the decision and its audit row).
-- $1 id, $2 operator, $3 reason. Returns the audit row id.
SELECT idem.quarantine_reject($1, $2, $3)
