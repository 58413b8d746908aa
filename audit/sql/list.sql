-- list.sql: audit rows, newest first, keyset on id.
-- $1 action: exact, or a namespace ("quarantine" matches "quarantine.reject")
-- $2 actor (the --operator label), $3 target, $4 since, $5 until (exclusive),
-- $6 before this id, $7 limit, $8 who: the person or the login (what
-- screens show as who did it).
-- NULL means no filter; run with a custom plan (the NULL tests fold away).
SELECT id, at, actor, person, db_user, action, target, details, prev_hash, hash
FROM idem.audit
WHERE ($1::text IS NULL OR action = $1 OR starts_with(action, $1 || '.'))
  AND ($2::text IS NULL OR actor = $2)
  AND ($3::text IS NULL OR target = $3)
  AND ($4::timestamptz IS NULL OR at >= $4)
  AND ($5::timestamptz IS NULL OR at < $5)
  AND ($6::bigint IS NULL OR id < $6)
  AND ($8::text IS NULL OR person = $8 OR db_user = $8)
ORDER BY id DESC
LIMIT $7
