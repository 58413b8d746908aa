-- append.sql: one report row at the end of the chain (idem.audit_append checks
-- the action and assigns id, at, person, db_user, prev_hash and hash under the
-- head's row lock). $1 actor, $2 action, $3 target ('' for none), $4 details
-- (the exact text of a JSON object).
SELECT id, at, actor, person, db_user, action, target, details, prev_hash, hash
FROM idem.audit_append($1, $2, $3, $4)
