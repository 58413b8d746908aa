-- effect_before_marker: the effect commits first, the marker afterwards in its
-- own transaction. A crash in between leaves an effect without a marker: the
-- retry finds nothing and applies it again.

-- name: schema
CREATE TABLE scratch.marker (
    tenant_id    text NOT NULL,
    operation_id text NOT NULL,
    payload_hash text NOT NULL,
    response     jsonb,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, operation_id)
);

-- name: read_marker
SELECT payload_hash, response FROM scratch.marker WHERE tenant_id = $1 AND operation_id = $2

-- name: insert_marker
INSERT INTO scratch.marker (tenant_id, operation_id, payload_hash, response)
VALUES ($1, $2, $3, $4::jsonb)
ON CONFLICT (tenant_id, operation_id) DO NOTHING
