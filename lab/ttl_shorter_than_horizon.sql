-- ttl_shorter_than_horizon: an atomic inbox (row, effect and response in one
-- transaction) whose entries expire after a TTL of 24 hours, while the
-- dead-letter queue can replay for 7 days. A late replay finds no entry and
-- applies the operation again. Time is simulated: the sweeper is told how far
-- the clock has moved.

-- name: schema
CREATE TABLE scratch.ttl_inbox (
    tenant_id    text NOT NULL,
    operation_id text NOT NULL,
    payload_hash text NOT NULL,
    response     jsonb,
    expires_at   timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, operation_id)
);

-- name: claim
INSERT INTO scratch.ttl_inbox (tenant_id, operation_id, payload_hash, expires_at)
VALUES ($1, $2, $3, now() + interval '24 hours')
ON CONFLICT (tenant_id, operation_id) DO NOTHING

-- name: read
SELECT payload_hash, response FROM scratch.ttl_inbox WHERE tenant_id = $1 AND operation_id = $2

-- name: save_response
UPDATE scratch.ttl_inbox SET response = $3::jsonb WHERE tenant_id = $1 AND operation_id = $2

-- name: expire
-- The TTL sweeper, run when the simulated clock has advanced by $1.
DELETE FROM scratch.ttl_inbox WHERE expires_at < now() + $1::interval
