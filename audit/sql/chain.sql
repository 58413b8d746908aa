-- chain.sql: every row of the log in id order, as stored, for verification
-- outside the database (nothing here is computed by PostgreSQL).
SELECT id, at, actor, person, db_user, action, target, details, prev_hash, hash
FROM idem.audit
ORDER BY id
