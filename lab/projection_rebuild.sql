-- projection_rebuild: a read model (turnover entries per transfer) fed from
-- the event log through an inbox whose entries expire after 24 hours, like
-- ttl_shorter_than_horizon. The DLQ replays on day 7 double entries, as they
-- double postings there. But a projection is derived data: it is rebuilt
-- from its source, the event log, which holds every operation once. After
-- the rebuild every total is right, whatever the inbox forgot. This is why a
-- bounded dedup horizon is acceptable for a rebuildable projection (class
-- retention 'horizon') and never for money (retention 'forever').

-- name: schema
-- The source: one event per business operation, as the producer published it.
CREATE TABLE scratch.event_log (
    tenant_id    text NOT NULL,
    operation_id text NOT NULL,
    payload      jsonb NOT NULL,
    PRIMARY KEY (tenant_id, operation_id)
);
CREATE TABLE scratch.projection_inbox (
    tenant_id    text NOT NULL,
    operation_id text NOT NULL,
    payload_hash text NOT NULL,
    response     jsonb,
    expires_at   timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, operation_id)
);
-- The projection. No unique key, so that a double shows as two entries; an
-- entry's id is derived from its operation, so a rebuilt entry keeps it.
CREATE TABLE scratch.turnover (
    tenant_id    text NOT NULL,
    operation_id text NOT NULL,
    entry_id     uuid NOT NULL,
    from_account text NOT NULL,
    to_account   text NOT NULL,
    amount       bigint NOT NULL,
    projected_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
-- project_transfer adds one entry; it locks both accounts as the ledger's
-- effect does (the lab holds a worker inside it that way).
CREATE FUNCTION scratch.project_transfer(p_tenant_id text, p_operation_id text, p_payload jsonb)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
DECLARE
    v_entry uuid := md5(p_tenant_id || '/' || p_operation_id)::uuid;
BEGIN
    PERFORM 1 FROM scratch.account
    WHERE tenant_id = p_tenant_id AND account_id IN (p_payload->>'from', p_payload->>'to')
    ORDER BY account_id
    FOR UPDATE;
    INSERT INTO scratch.turnover (tenant_id, operation_id, entry_id, from_account, to_account, amount)
    VALUES (p_tenant_id, p_operation_id, v_entry, p_payload->>'from', p_payload->>'to', (p_payload->>'amount')::bigint);
    RETURN jsonb_build_object('posting_id', v_entry);
END
$$;

-- name: publish
INSERT INTO scratch.event_log (tenant_id, operation_id, payload)
SELECT t, o, p::jsonb FROM unnest($1::text[], $2::text[], $3::text[]) AS x(t, o, p)

-- name: claim
INSERT INTO scratch.projection_inbox (tenant_id, operation_id, payload_hash, expires_at)
VALUES ($1, $2, $3, now() + interval '24 hours')
ON CONFLICT (tenant_id, operation_id) DO NOTHING

-- name: read
SELECT payload_hash, response FROM scratch.projection_inbox WHERE tenant_id = $1 AND operation_id = $2

-- name: project
SELECT scratch.project_transfer($1, $2, $3::jsonb)

-- name: save_response
UPDATE scratch.projection_inbox SET response = $3::jsonb WHERE tenant_id = $1 AND operation_id = $2

-- name: expire
-- The TTL sweeper, run when the simulated clock has advanced by $1: the
-- replays after it are doubled in the projection.
DELETE FROM scratch.projection_inbox WHERE expires_at < now() + $1::interval

-- name: rebuild
-- What makes the horizon harmless here: recompute the projection from the
-- event log, whole.
DELETE FROM scratch.turnover;
INSERT INTO scratch.turnover (tenant_id, operation_id, entry_id, from_account, to_account, amount)
SELECT tenant_id, operation_id, md5(tenant_id || '/' || operation_id)::uuid,
       payload->>'from', payload->>'to', (payload->>'amount')::bigint
FROM scratch.event_log

-- name: entries
SELECT tenant_id, operation_id, entry_id::text, amount
FROM scratch.turnover
ORDER BY tenant_id, operation_id, projected_at, entry_id
