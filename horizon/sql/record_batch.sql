-- Count one purge transaction into plan $1 and log it: relation $2, method $3,
-- rows removed $4, rows kept $5 (swap), started at $6 (database clock).
WITH p AS (
    UPDATE idem.horizon_plan SET purged = purged + $4, batches = batches + 1
    WHERE id = $1 RETURNING batches
)
INSERT INTO idem.horizon_batch (plan_id, seq, part, method, rows, kept, started_at)
SELECT $1, p.batches, $2, $3, $4, $5, $6 FROM p
