-- nonatomic_payload_check: the payload is compared in a SELECT, then the row is
-- inserted. When the insert finds the identity taken by a concurrent request,
-- the check is believed to have passed already and the stored response is
-- returned, although it belongs to another command.

-- name: schema
CREATE TABLE scratch.checked_inbox (
    tenant_id    text NOT NULL,
    operation_id text NOT NULL,
    payload_hash text NOT NULL,
    response     jsonb,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, operation_id)
);

-- name: check
SELECT payload_hash, response FROM scratch.checked_inbox WHERE tenant_id = $1 AND operation_id = $2

-- name: insert
INSERT INTO scratch.checked_inbox (tenant_id, operation_id, payload_hash)
VALUES ($1, $2, $3)
ON CONFLICT (tenant_id, operation_id) DO NOTHING

-- name: read_response
SELECT response FROM scratch.checked_inbox WHERE tenant_id = $1 AND operation_id = $2

-- name: save_response
UPDATE scratch.checked_inbox SET response = $3::jsonb WHERE tenant_id = $1 AND operation_id = $2
