-- marker_separate_tx: the dedup marker commits in its own transaction, then the
-- effect runs in another. A crash in between leaves a marker without an effect:
-- every retry is "deduplicated" and the effect is lost for ever.

-- name: schema
CREATE TABLE scratch.marker (
    tenant_id    text NOT NULL,
    operation_id text NOT NULL,
    payload_hash text NOT NULL,
    response     jsonb,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, operation_id)
);

-- name: insert_marker
INSERT INTO scratch.marker (tenant_id, operation_id, payload_hash)
VALUES ($1, $2, $3)
ON CONFLICT (tenant_id, operation_id) DO NOTHING

-- name: read_marker
SELECT payload_hash, response FROM scratch.marker WHERE tenant_id = $1 AND operation_id = $2

-- name: save_response
UPDATE scratch.marker SET response = $3::jsonb WHERE tenant_id = $1 AND operation_id = $2
