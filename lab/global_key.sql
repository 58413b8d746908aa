-- global_key: an atomic inbox (row, effect and response in one transaction)
-- keyed on operation_id alone. Operation ids look globally unique (order
-- numbers, UUIDs), but each tenant picks its own: when a second tenant uses
-- an id the first one already used, its operation finds the first tenant's
-- row, is taken for a retry, and is answered with the first tenant's result.
-- Its effect never runs.

-- name: schema
CREATE TABLE scratch.global_inbox (
    operation_id text PRIMARY KEY, -- the flaw: no tenant_id in the key
    payload_hash text NOT NULL,
    response     jsonb,
    created_at   timestamptz NOT NULL DEFAULT now()
);

-- name: claim
INSERT INTO scratch.global_inbox (operation_id, payload_hash)
VALUES ($1, $2)
ON CONFLICT (operation_id) DO NOTHING

-- name: read
-- Breaks here: the row found may be another tenant's.
SELECT payload_hash, response FROM scratch.global_inbox WHERE operation_id = $1

-- name: save_response
UPDATE scratch.global_inbox SET response = $2::jsonb WHERE operation_id = $1
