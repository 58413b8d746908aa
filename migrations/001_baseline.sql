-- 001_baseline: the tables of schema idem. Functions, views and triggers are
-- not here: they are the code package (migrations/code/, one object a file),
-- installed after the numbered migrations and re-installed whenever it
-- changes. Numbered migrations change tables only.
--
-- Everything here is owned by the schema owner role (idem_owner by default; a
-- NOLOGIN role that is not a superuser): `idemctl migrate` runs this file under
-- SET ROLE to it. No other role may write these tables directly; services,
-- operators and auditors go through the functions (migrations/code).
--
-- Every table is keyed tenant first, so that the per-operation tables
-- (identity, inbox_body, quarantine, pending_claim) can be distributed by
-- tenant_id and co-located.

-- op_class registers what an operation does. effect is a SQL function
-- (tenant_id text, operation_id text, payload jsonb) RETURNS jsonb, SECURITY
-- DEFINER and owned by a role with no rights on schema idem; NULL means the
-- effect is application code run through idem.claim/idem.complete.
-- retention 'forever' (money) purges only with a business contract reference;
-- 'horizon' (rebuildable projections) purges once the replay horizon is proven.
CREATE TABLE idem.op_class (
    name        text PRIMARY KEY
                CHECK (name ~ '^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$' AND octet_length(name) <= 128),
    effect      regprocedure,
    retention   text NOT NULL DEFAULT 'forever' CHECK (retention IN ('forever', 'horizon')),
    min_age     interval CHECK (min_age IS NULL OR min_age >= interval '0'),
    description text CHECK (description IS NULL OR (octet_length(description) <= 1024
                            AND description !~ '[\x01-\x1f\x7f-\x9f]')),
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- identity: one narrow row per identity. Its primary key settles every race,
-- purges included: a purge never deletes it, so after a purge the row is the
-- tombstone. payload_digest is the SHA-256 of the canonical payload text
-- (jcs-sha256:<hex> without its prefix). holds counts the open or rejected
-- quarantine records whose stored side is this tombstone (their evidence
-- keeps it; see idem.record_conflict).
CREATE TABLE idem.identity (
    tenant_id      text NOT NULL,
    operation_id   text NOT NULL,
    op_class       text NOT NULL,
    payload_digest bytea NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    holds          integer NOT NULL DEFAULT 0 CHECK (holds >= 0),
    PRIMARY KEY (tenant_id, operation_id),
    CONSTRAINT identity_valid CHECK (
        octet_length(tenant_id) BETWEEN 1 AND 128 AND octet_length(operation_id) BETWEEN 1 AND 256
        AND tenant_id !~ '[\x01-\x1f\x7f-\x9f]' AND operation_id !~ '[\x01-\x1f\x7f-\x9f]'),
    CONSTRAINT identity_digest_form CHECK (octet_length(payload_digest) = 32)
);

-- inbox_body: the canonical payload text (exactly the bytes the hash was
-- computed over), the saved response and the transport metadata, partitioned
-- by UTC day of created_at. A purge removes body rows only. op_class is
-- repeated so that a purge picks its rows without a join. holds counts the
-- open or rejected quarantine records whose evidence is this body: a purge
-- never removes a body with holds > 0, and the counter lives on the row the
-- purge deletes, so a conflict committed before the deletion commits is seen.
CREATE TABLE idem.inbox_body (
    tenant_id    text NOT NULL,
    operation_id text NOT NULL,
    created_at   timestamptz NOT NULL,
    op_class     text NOT NULL,
    payload      text NOT NULL,
    response     jsonb, -- NULL only inside the claiming transaction (idem.claim)
    transport    jsonb,
    holds        integer NOT NULL DEFAULT 0 CHECK (holds >= 0),
    PRIMARY KEY (tenant_id, operation_id, created_at)
) PARTITION BY RANGE (created_at);

-- A summary of the classes in each range of 128 pages: a purge finds the rows
-- of other classes in a day without reading the day.
CREATE INDEX inbox_body_class_brin ON idem.inbox_body USING brin (op_class) WITH (autosummarize = on);

-- Rows of a day without its own partition land here; purges reach them by batches.
CREATE TABLE idem.inbox_body_default PARTITION OF idem.inbox_body DEFAULT;

-- pending_claim holds the identities claimed through idem.claim until
-- idem.complete saves their response, in the same transaction. A commit with
-- a claim still pending is refused (a deferred constraint trigger), so a
-- marker without its effect can never be committed.
CREATE TABLE idem.pending_claim (
    tenant_id    text NOT NULL,
    operation_id text NOT NULL,
    PRIMARY KEY (tenant_id, operation_id)
);

-- quarantine: a conflict, the same identity with another payload (or class).
-- Both sides are kept; a repeat of the same conflict bumps occurrences. The
-- payloads are canonical texts whose hashes the CHECKs recompute.
-- stored_payload is NULL when the stored side had been purged (a tombstone).
-- holds_on says which row the record holds while open or rejected.
CREATE TABLE idem.quarantine (
    tenant_id          text NOT NULL,
    operation_id       text NOT NULL,
    incoming_hash      text NOT NULL,
    incoming_class     text NOT NULL,
    id                 bigint GENERATED ALWAYS AS IDENTITY,
    op_class           text NOT NULL,
    stored_hash        text NOT NULL,
    stored_payload     text,
    stored_response    jsonb,
    incoming_payload   text NOT NULL,
    incoming_transport jsonb,
    diff               jsonb NOT NULL,
    holds_on           text NOT NULL CHECK (holds_on IN ('body', 'identity')),
    detected_app       text,
    detected_user      text,
    detected_operator  text,
    first_seen         timestamptz NOT NULL DEFAULT now(),
    last_seen          timestamptz NOT NULL DEFAULT now(),
    occurrences        bigint NOT NULL DEFAULT 1,
    status             text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'rejected', 'accepted')),
    decided_at         timestamptz,
    decided_by         text,
    decided_person     text,
    decided_db_user    text,
    decision_reason    text,
    new_operation_id   text,
    new_outcome        text,
    decision_audit_id  bigint,
    PRIMARY KEY (tenant_id, operation_id, incoming_hash, incoming_class),
    UNIQUE (tenant_id, id),
    CONSTRAINT quarantine_identity_valid CHECK (
        octet_length(tenant_id) BETWEEN 1 AND 128 AND octet_length(operation_id) BETWEEN 1 AND 256
        AND tenant_id !~ '[\x01-\x1f\x7f-\x9f]' AND operation_id !~ '[\x01-\x1f\x7f-\x9f]'),
    CONSTRAINT quarantine_hash_form CHECK (
        stored_hash ~ '^jcs-sha256:[0-9a-f]{64}$' AND incoming_hash ~ '^jcs-sha256:[0-9a-f]{64}$'),
    CONSTRAINT quarantine_incoming_hash_matches CHECK (
        incoming_hash = 'jcs-sha256:' || encode(sha256(convert_to(incoming_payload, 'UTF8')), 'hex')),
    CONSTRAINT quarantine_stored_hash_matches CHECK (
        stored_payload IS NULL
        OR stored_hash = 'jcs-sha256:' || encode(sha256(convert_to(stored_payload, 'UTF8')), 'hex')),
    CONSTRAINT quarantine_decision_complete CHECK (CASE status
        WHEN 'open' THEN decided_at IS NULL AND decided_by IS NULL AND decided_db_user IS NULL
             AND decided_person IS NULL AND decision_reason IS NULL AND new_operation_id IS NULL
             AND new_outcome IS NULL AND decision_audit_id IS NULL
        WHEN 'rejected' THEN decided_at IS NOT NULL AND decided_by IS NOT NULL AND decided_db_user IS NOT NULL
             AND decision_reason IS NOT NULL AND new_operation_id IS NULL AND new_outcome IS NULL
             AND decision_audit_id IS NOT NULL
        ELSE decided_at IS NOT NULL AND decided_by IS NOT NULL AND decided_db_user IS NOT NULL
             AND decision_reason IS NOT NULL AND new_operation_id IS NOT NULL
             AND new_outcome IN ('applied', 'already_applied') AND decision_audit_id IS NOT NULL
        END),
    CONSTRAINT quarantine_new_identity_valid CHECK (
        new_operation_id IS NULL
        OR (octet_length(new_operation_id) BETWEEN 1 AND 256 AND new_operation_id !~ '[\x01-\x1f\x7f-\x9f]'
            AND new_operation_id <> operation_id))
);

CREATE INDEX quarantine_id_idx ON idem.quarantine (id);
CREATE INDEX quarantine_last_seen_idx ON idem.quarantine (last_seen DESC, id DESC);
CREATE INDEX quarantine_status_activity_idx ON idem.quarantine (status, last_seen DESC, id DESC);
CREATE INDEX quarantine_tenant_activity_idx ON idem.quarantine (tenant_id, last_seen DESC, id DESC);
CREATE INDEX quarantine_tenant_status_activity_idx ON idem.quarantine (tenant_id, status, last_seen DESC, id DESC);

-- person: the people behind database logins. Four-eyes compares persons, not
-- the self-declared --operator label and not logins: one person may have
-- several logins (or a pattern of dynamic ones, e.g. v-vault-ops-*). Only the
-- schema owner maps logins (idemctl person add).
CREATE TABLE idem.person (
    name       text PRIMARY KEY
               CHECK (octet_length(name) BETWEEN 1 AND 128 AND name !~ '[\x01-\x1f\x7f-\x9f]' AND btrim(name) = name),
    created_at timestamptz NOT NULL DEFAULT now(),
    created_by text NOT NULL
);

-- person_login maps a login name, or a glob pattern of login names (* matches
-- any run of characters), to a person.
CREATE TABLE idem.person_login (
    login_pattern text PRIMARY KEY
                  CHECK (octet_length(login_pattern) BETWEEN 1 AND 128 AND login_pattern !~ '[\x01-\x1f\x7f-\x9f]'
                         AND login_pattern <> '*'),
    person        text NOT NULL REFERENCES idem.person (name),
    created_at    timestamptz NOT NULL DEFAULT now(),
    created_by    text NOT NULL
);
CREATE INDEX person_login_person_idx ON idem.person_login (person);

-- audit: one row per operator action, append-only, each row chained to the
-- one before by hash. Rows are numbered 1, 2, 3... without gaps (ids assigned
-- under the head's row lock), so a missing number is a deleted row; prev_hash
-- is UNIQUE, so the chain cannot fork. details is a JSON object kept as the
-- exact text that was hashed. The hashed bytes are defined in
-- migrations/code/020_audit_row_hash.sql and the README, so that anyone can
-- recompute them without PostgreSQL.
CREATE TABLE idem.audit (
    id        bigint PRIMARY KEY CHECK (id > 0),
    at        timestamptz NOT NULL,
    actor     text NOT NULL CHECK (actor <> '' AND octet_length(actor) <= 256),
    person    text NOT NULL DEFAULT '',
    db_user   text NOT NULL,
    action    text NOT NULL
              CHECK (action ~ '^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$' AND octet_length(action) <= 128),
    target    text NOT NULL DEFAULT '' CHECK (octet_length(target) <= 512),
    details   text NOT NULL,
    prev_hash text NOT NULL UNIQUE,
    hash      text NOT NULL
);
CREATE INDEX audit_action_idx ON idem.audit (action, id);
CREATE INDEX audit_target_idx ON idem.audit (target, id);

-- audit_head is the chain's tip: appends serialise on its row lock, and verify
-- compares it with the table's last row.
CREATE TABLE idem.audit_head (
    singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    last_id    bigint NOT NULL,
    last_hash  text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO idem.audit_head (last_id, last_hash) VALUES (0, 'sha256:' || repeat('0', 64));

-- horizon_source: replay sources other than the built-in 'manual' one. config
-- never holds a secret: a source refers to its credentials (an environment
-- variable, a libpq service or passfile entry) and idem.horizon_source_add
-- refuses a config that carries a password.
CREATE TABLE idem.horizon_source (
    name       text PRIMARY KEY
               CHECK (name ~ '^[a-z0-9][a-z0-9_.-]*$' AND octet_length(name) <= 64 AND name <> 'manual'),
    kind       text NOT NULL CHECK (kind IN ('postgres', 'archive', 'nats', 'kafka')),
    config     jsonb NOT NULL CHECK (jsonb_typeof(config) = 'object'),
    timeout    interval NOT NULL DEFAULT '30 seconds' CHECK (timeout > interval '0'),
    created_at timestamptz NOT NULL DEFAULT now(),
    created_by text NOT NULL
);

-- horizon_correction: pending manual corrections (operations someone may still
-- replay by hand). They are the 'manual' source and pin their identities.
CREATE TABLE idem.horizon_correction (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id    text NOT NULL,
    operation_id text NOT NULL,
    reason       text NOT NULL CHECK (btrim(reason) <> '' AND octet_length(reason) <= 4096),
    created_at   timestamptz NOT NULL DEFAULT now(),
    created_by   text NOT NULL,
    done_at      timestamptz,
    done_by      text,
    CONSTRAINT correction_identity_valid CHECK (
        octet_length(tenant_id) BETWEEN 1 AND 128 AND octet_length(operation_id) BETWEEN 1 AND 256
        AND tenant_id !~ '[\x01-\x1f\x7f-\x9f]' AND operation_id !~ '[\x01-\x1f\x7f-\x9f]'),
    CONSTRAINT correction_done_complete CHECK ((done_at IS NULL) = (done_by IS NULL))
);
CREATE INDEX horizon_correction_pending_idx ON idem.horizon_correction (tenant_id, operation_id) WHERE done_at IS NULL;

-- horizon_plan: what a purge may remove (class, cutoff) and the proof it rests
-- on. Its state moves only through the horizon functions:
--   planned -> approved -> purging -> done, and planned/approved/purging -> aborted.
-- planned_person and approved_person are the persons behind the logins
-- (four-eyes); planned_by and approved_by the --operator labels, for the record.
CREATE TABLE idem.horizon_plan (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    op_class         text NOT NULL,
    action           text NOT NULL DEFAULT 'purge' CHECK (action IN ('purge', 'drop_tombstones')),
    state            text NOT NULL DEFAULT 'planned'
                     CHECK (state IN ('planned', 'approved', 'purging', 'done', 'aborted')),
    retention        text NOT NULL CHECK (retention IN ('forever', 'horizon')),
    min_age          interval,
    contract         text CHECK (contract IS NULL OR (btrim(contract) <> '' AND octet_length(contract) <= 512)),
    before           timestamptz NOT NULL,
    cutoff           timestamptz NOT NULL,
    margin           interval NOT NULL,
    planned_at       timestamptz NOT NULL DEFAULT now(),
    planned_by       text NOT NULL,
    planned_person   text NOT NULL,
    planned_db_user  text NOT NULL,
    approved_at      timestamptz,
    approved_by      text,
    approved_person  text,
    approved_db_user text,
    purge_started_at timestamptz,
    finished_at      timestamptz,
    aborted_at       timestamptz,
    aborted_by       text,
    abort_reason     text,
    candidates       bigint NOT NULL DEFAULT 0,
    pinned           bigint NOT NULL DEFAULT 0,
    purged           bigint NOT NULL DEFAULT 0,
    batches          integer NOT NULL DEFAULT 0,
    proof            jsonb NOT NULL,
    CONSTRAINT plan_forever_contract CHECK (retention <> 'forever' OR (contract IS NOT NULL AND action = 'purge')),
    CONSTRAINT plan_four_eyes CHECK (approved_person IS NULL OR approved_person <> planned_person),
    CONSTRAINT plan_state_complete CHECK (CASE state
        WHEN 'planned' THEN approved_at IS NULL AND purge_started_at IS NULL AND finished_at IS NULL AND aborted_at IS NULL
        WHEN 'approved' THEN approved_at IS NOT NULL AND approved_person IS NOT NULL AND purge_started_at IS NULL
             AND finished_at IS NULL AND aborted_at IS NULL
        WHEN 'purging' THEN approved_at IS NOT NULL AND purge_started_at IS NOT NULL AND finished_at IS NULL
             AND aborted_at IS NULL
        WHEN 'done' THEN approved_at IS NOT NULL AND purge_started_at IS NOT NULL AND finished_at IS NOT NULL
             AND aborted_at IS NULL
        ELSE aborted_at IS NOT NULL AND abort_reason IS NOT NULL AND finished_at IS NULL
        END)
);
CREATE INDEX horizon_plan_class_idx ON idem.horizon_plan (op_class, id);

-- horizon_pin: identities a plan must not purge, enumerated by a source or
-- held by an open or rejected quarantine record at plan time.
CREATE TABLE idem.horizon_pin (
    plan_id      bigint NOT NULL REFERENCES idem.horizon_plan (id),
    tenant_id    text NOT NULL,
    operation_id text NOT NULL,
    source       text NOT NULL,
    PRIMARY KEY (plan_id, tenant_id, operation_id)
);

-- horizon_enum: what enumerating probes stream while they run (one run per
-- check, plan or re-probe), read back in SQL and deleted.
CREATE UNLOGGED TABLE idem.horizon_enum (
    run_id       uuid NOT NULL,
    source       text NOT NULL,
    tenant_id    text NOT NULL,
    operation_id text NOT NULL,
    ts           timestamptz
);
CREATE INDEX horizon_enum_run_idx ON idem.horizon_enum (run_id, tenant_id, operation_id);

-- horizon_batch: one row per purge transaction: progress for a resume,
-- evidence afterwards, and how long each held its locks.
CREATE TABLE idem.horizon_batch (
    plan_id     bigint NOT NULL REFERENCES idem.horizon_plan (id),
    seq         integer NOT NULL,
    part        text NOT NULL,
    method      text NOT NULL CHECK (method IN ('swap', 'batch', 'tombstones')),
    rows        bigint NOT NULL,
    kept        bigint NOT NULL DEFAULT 0,
    started_at  timestamptz NOT NULL,
    finished_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (plan_id, seq)
);
