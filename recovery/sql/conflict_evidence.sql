-- A conflict record of this run, by identity, incoming hash and class (its
-- unique key): its id, what the inbox held (stored hash and class), and the
-- values that differ (idem.json_diff at conflict time). Read on the
-- transaction's connection after the executor recorded it, or on another
-- connection when that one dropped after COMMIT.
SELECT id, coalesce(stored_hash, ''), op_class, diff FROM idem.quarantine
WHERE tenant_id = $1 AND operation_id = $2 AND incoming_hash = $3 AND incoming_class = $4
