-- append.sql: one row at the end of the chain. The trigger idem.audit_chain
-- assigns id, at, db_user, prev_hash and hash under the head's row lock.
-- $1 actor, $2 action, $3 target (NULL for none), $4 details (a JSON object).
INSERT INTO idem.audit (actor, action, target, details)
VALUES ($1, $2, $3, $4)
RETURNING id, at, actor, db_user, action, target, details, prev_hash, hash
