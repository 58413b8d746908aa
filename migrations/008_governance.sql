-- 008_governance: four eyes where money moves.
--
-- op_class.money declares that a class moves money and where its amount is:
-- JSON Pointers into the payload for the amount and the currency, and
-- whether amounts are in minor units (cents) or major ones. NULL: the class
-- moves no money. One person declares it; changing or removing it needs a
-- second person (idem.governed_change), because it switches four eyes off.
ALTER TABLE idem.op_class
    ADD COLUMN money jsonb CONSTRAINT class_money_form CHECK (money IS NULL OR (
        jsonb_typeof(money) = 'object' AND money ?& ARRAY['amount', 'currency', 'unit']
        AND money - 'amount' - 'currency' - 'unit' = '{}'::jsonb
        AND money ->> 'amount' ~ '^/' AND money ->> 'currency' ~ '^/'
        AND octet_length(money ->> 'amount') <= 256 AND octet_length(money ->> 'currency') <= 256
        AND money ->> 'amount' !~ '[\x01-\x1f\x7f-\x9f]' AND money ->> 'currency' !~ '[\x01-\x1f\x7f-\x9f]'
        AND money ->> 'unit' IN ('minor', 'major')));

-- governed_change: a change that weakens a proof or switches four eyes off
-- (changing or removing a money declaration, removing a replay source). One
-- person plans it, another approves it, and the approval applies it in the
-- same transaction: planned -> approved (applied), or planned -> aborted.
-- before is what the target was when planned; the approval refuses a target
-- that changed since.
CREATE TABLE idem.governed_change (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind             text NOT NULL CHECK (kind IN ('class_money', 'source_remove')),
    target           text NOT NULL CHECK (octet_length(target) BETWEEN 1 AND 128),
    before           jsonb,
    after            jsonb,
    reason           text NOT NULL CHECK (btrim(reason) <> '' AND octet_length(reason) <= 4096),
    state            text NOT NULL DEFAULT 'planned' CHECK (state IN ('planned', 'approved', 'aborted')),
    planned_at       timestamptz NOT NULL DEFAULT now(),
    planned_by       text NOT NULL,
    planned_person   text NOT NULL,
    planned_db_user  text NOT NULL,
    approved_at      timestamptz,
    approved_by      text,
    approved_person  text,
    approved_db_user text,
    aborted_at       timestamptz,
    aborted_by       text,
    abort_reason     text,
    CONSTRAINT change_four_eyes CHECK (approved_person IS NULL OR approved_person <> planned_person),
    CONSTRAINT change_state_complete CHECK (CASE state
        WHEN 'planned' THEN approved_at IS NULL AND aborted_at IS NULL
        WHEN 'approved' THEN approved_at IS NOT NULL AND approved_person IS NOT NULL AND aborted_at IS NULL
        ELSE aborted_at IS NOT NULL AND abort_reason IS NOT NULL AND approved_at IS NULL
        END)
);
CREATE INDEX governed_change_target_idx ON idem.governed_change (kind, target, id);

-- bulk_preview: the exact set of quarantine records a bulk preview showed.
-- A bulk decision acts only on a preview's set: the token is used once, by
-- the person who previewed, within its hour.
CREATE TABLE idem.bulk_preview (
    token      text PRIMARY KEY CHECK (token ~ '^pv-[0-9a-f]{32}$'),
    action     text NOT NULL CHECK (action IN ('reject', 'accept')),
    ids        bigint[] NOT NULL CHECK (cardinality(ids) BETWEEN 1 AND 1000000),
    selection  jsonb NOT NULL,
    person     text NOT NULL,
    db_user    text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    used_at    timestamptz,
    used_by    text
);

-- entry_plan: identities that enter the inbox without their effect running
-- (kind record: outcomes known from outside, recorded by hand; kind import:
-- an existing store adopted). One person plans with the source's digest,
-- the counts and a sample; another approves; then it runs. State:
-- planned -> approved -> running -> done, and planned/approved/running -> aborted.
CREATE TABLE idem.entry_plan (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind             text NOT NULL CHECK (kind IN ('record', 'import')),
    source           text NOT NULL CHECK (btrim(source) <> '' AND octet_length(source) <= 512
                                          AND source !~ '[\x01-\x1f\x7f-\x9f]'),
    source_digest    text NOT NULL CHECK (source_digest ~ '^sha256:[0-9a-f]{64}$'),
    items            integer NOT NULL CHECK (items >= 1),
    counts           jsonb NOT NULL,
    sample           jsonb NOT NULL,
    reason           text NOT NULL CHECK (btrim(reason) <> '' AND octet_length(reason) <= 4096),
    contract         text CHECK (contract IS NULL OR (btrim(contract) <> '' AND octet_length(contract) <= 512)),
    correction       text CHECK (correction IS NULL OR (btrim(correction) <> '' AND octet_length(correction) <= 512)),
    state            text NOT NULL DEFAULT 'planned'
                     CHECK (state IN ('planned', 'approved', 'running', 'done', 'aborted')),
    planned_at       timestamptz NOT NULL DEFAULT now(),
    planned_by       text NOT NULL,
    planned_person   text NOT NULL,
    planned_db_user  text NOT NULL,
    approved_at      timestamptz,
    approved_by      text,
    approved_person  text,
    approved_db_user text,
    started_at       timestamptz,
    finished_at      timestamptz,
    aborted_at       timestamptz,
    aborted_by       text,
    abort_reason     text,
    entered          integer NOT NULL DEFAULT 0,
    left_alone       integer NOT NULL DEFAULT 0,
    CONSTRAINT entry_four_eyes CHECK (approved_person IS NULL OR approved_person <> planned_person),
    CONSTRAINT entry_state_complete CHECK (CASE state
        WHEN 'planned' THEN approved_at IS NULL AND started_at IS NULL AND finished_at IS NULL AND aborted_at IS NULL
        WHEN 'approved' THEN approved_person IS NOT NULL AND started_at IS NULL AND finished_at IS NULL AND aborted_at IS NULL
        WHEN 'running' THEN approved_person IS NOT NULL AND started_at IS NOT NULL AND finished_at IS NULL AND aborted_at IS NULL
        WHEN 'done' THEN approved_person IS NOT NULL AND started_at IS NOT NULL AND finished_at IS NOT NULL AND aborted_at IS NULL
        ELSE aborted_at IS NOT NULL AND abort_reason IS NOT NULL AND finished_at IS NULL
        END)
);

-- entry_item: one identity of an entry plan, with its canonical payload
-- (the text its hash was computed over), the response in the service's own
-- shape and the evidence (e.g. the provider's reference). outcome is set by
-- the run: entered; exists (the identity appeared meanwhile: left alone);
-- refused (a claim on it was pending or a quarantine record of it open).
CREATE TABLE idem.entry_item (
    plan_id      bigint NOT NULL REFERENCES idem.entry_plan (id),
    seq          integer NOT NULL CHECK (seq >= 1),
    tenant_id    text NOT NULL,
    operation_id text NOT NULL,
    op_class     text NOT NULL,
    payload      text NOT NULL,
    payload_hash text NOT NULL,
    response     jsonb NOT NULL,
    evidence     text NOT NULL CHECK (btrim(evidence) <> '' AND octet_length(evidence) <= 1024
                                      AND evidence !~ '[\x01-\x1f\x7f-\x9f]'),
    outcome      text CHECK (outcome IN ('entered', 'exists', 'refused')),
    PRIMARY KEY (plan_id, seq),
    UNIQUE (plan_id, tenant_id, operation_id)
);

-- identity.entry_plan names the entry plan an identity entered by without
-- its effect; NULL: it was executed (idem.execute, or idem.claim then
-- idem.complete).
ALTER TABLE idem.identity ADD COLUMN entry_plan bigint;

-- An accept-as-new plan of one record may name its new operation outright
-- (a single accept-as-new of a money class); a plan of several needs the
-- {operation_id} rule.
ALTER TABLE idem.quarantine_bulk_accept DROP CONSTRAINT quarantine_bulk_accept_rule_check;
ALTER TABLE idem.quarantine_bulk_accept ADD CONSTRAINT bulk_accept_rule CHECK (
    (strpos(rule, '{operation_id}') > 0 OR cardinality(ids) = 1) AND octet_length(rule) BETWEEN 1 AND 256);
