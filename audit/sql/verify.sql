-- verify.sql: walks the whole chain once, recomputing every hash, and returns
-- the size of the log, its last row, the head, and the first broken row (NULL
-- when the rows chain correctly). Rows are numbered 1, 2, 3... without gaps, so a
-- gap is a deleted row; row N's prev_hash must be row N-1's hash (the genesis
-- hash for row 1); a row's hash must recompute from its content.
WITH chain AS (
    SELECT a.id, a.prev_hash, a.hash,
           idem.audit_row_hash(a.id, a.at, a.actor, a.db_user, a.action, a.target, a.details, a.prev_hash) AS recomputed,
           coalesce(lag(a.id) OVER w, 0) AS before_id,
           coalesce(lag(a.hash) OVER w, idem.audit_genesis()) AS before_hash
    FROM idem.audit a
    WINDOW w AS (ORDER BY a.id)
), broken AS (
    SELECT CASE WHEN id <> before_id + 1 THEN before_id + 1 ELSE id END AS row_id,
           CASE
               WHEN id <> before_id + 1 AND id = before_id + 2 THEN
                   format('row %s is missing (deleted): row %s follows row %s', before_id + 1, id, before_id)
               WHEN id <> before_id + 1 THEN
                   format('rows %s-%s are missing (deleted): row %s follows row %s', before_id + 1, id - 1, id, before_id)
               WHEN prev_hash <> before_hash AND id = 1 THEN
                   'its prev_hash is not the genesis hash: a row was inserted or replaced at the start'
               WHEN prev_hash <> before_hash THEN
                   format('its prev_hash is not the hash of row %s: row %s was rewritten, or this row was inserted or replaced',
                          before_id, before_id)
               WHEN hash <> recomputed THEN
                   'its content does not match its hash: the row was modified'
           END AS problem
    FROM chain
)
SELECT (SELECT count(*) FROM chain) AS rows,
       coalesce((SELECT max(id) FROM chain), 0) AS last_id,
       coalesce((SELECT hash FROM chain ORDER BY id DESC LIMIT 1), idem.audit_genesis()) AS last_hash,
       h.last_id AS head_id,
       h.last_hash AS head_hash,
       b.row_id AS broken_id,
       b.problem
FROM (SELECT 1) AS one
LEFT JOIN idem.audit_head h ON h.singleton
LEFT JOIN LATERAL (
    SELECT row_id, problem FROM broken WHERE problem IS NOT NULL ORDER BY row_id LIMIT 1
) b ON true
