-- raw_json_compare: an atomic inbox (row, effect and response in one
-- transaction) whose payload_hash is the SHA-256 of the request body as it
-- arrived ('raw-sha256:<hex>', computed by the client code), not of its
-- RFC 8785 canonical form. The same command serialised by another library
-- (keys in another order, other whitespace, other escapes) hashes otherwise
-- and is refused as a conflict: a false conflict, quarantined for a person.

-- name: schema
CREATE TABLE scratch.raw_inbox (
    tenant_id    text NOT NULL,
    operation_id text NOT NULL,
    payload_hash text NOT NULL, -- the flaw: a hash of the raw text
    response     jsonb,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, operation_id)
);

-- name: claim
INSERT INTO scratch.raw_inbox (tenant_id, operation_id, payload_hash)
VALUES ($1, $2, $3)
ON CONFLICT (tenant_id, operation_id) DO NOTHING

-- name: read
-- Breaks here: the caller compares this hash with the raw hash of its own text.
SELECT payload_hash, response FROM scratch.raw_inbox WHERE tenant_id = $1 AND operation_id = $2

-- name: save_response
UPDATE scratch.raw_inbox SET response = $3::jsonb WHERE tenant_id = $1 AND operation_id = $2
