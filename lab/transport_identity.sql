-- transport_identity: an atomic inbox (row, effect and response in one
-- transaction) keyed on where the broker delivered the message: (topic,
-- partition, offset). A redelivery of the same message dedupes; the same
-- command published again (an outbox relay run twice, a producer's retry, a
-- replay from the DLQ topic) has a new offset, so it is a new row and the
-- effect runs again. Transport identity is for tracing only.

-- name: schema
CREATE TABLE scratch.transport_inbox (
    topic        text NOT NULL,
    partition    int NOT NULL,
    msg_offset   bigint NOT NULL,
    payload_hash text NOT NULL,
    response     jsonb,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (topic, partition, msg_offset) -- the flaw: no business identity
);

-- name: claim
-- Breaks here: a republished command is a new (topic, partition, offset).
INSERT INTO scratch.transport_inbox (topic, partition, msg_offset, payload_hash)
VALUES ($1, $2, $3, $4)
ON CONFLICT (topic, partition, msg_offset) DO NOTHING

-- name: read
SELECT payload_hash, response FROM scratch.transport_inbox
WHERE topic = $1 AND partition = $2 AND msg_offset = $3

-- name: save_response
UPDATE scratch.transport_inbox SET response = $4::jsonb
WHERE topic = $1 AND partition = $2 AND msg_offset = $3
