-- 001_core: identity rules, operation classes, the inbox, the conflict record
-- and the atomic executor (idem.claim, idem.complete, idem.execute).
--
-- Errors raised here carry SQLSTATEs of class IX so that any client can branch
-- on them without matching message text:
--   IX001 invalid identity          IX002 invalid payload hash
--   IX003 unknown operation class   IX004 class has no SQL effect
--   IX005 complete without a claim  IX006 missing payload
--   IX007 identity could not be settled (retry)
--   IX008 invalid class registration     IX009 commit with a claim not completed

CREATE SCHEMA IF NOT EXISTS idem;

-- identity_problem says what is wrong with an identity, or NULL when it is valid.
-- The same rules are enforced in Go (idem.Identity.Validate); keep them in step.
-- Control characters are Unicode category Cc: U+0001-U+001F and U+007F-U+009F
-- (U+0000 cannot be stored in text at all).
CREATE FUNCTION idem.identity_problem(p_tenant_id text, p_operation_id text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN p_tenant_id IS NULL OR p_tenant_id = '' THEN 'tenant_id is required'
        WHEN octet_length(p_tenant_id) > 128 THEN 'tenant_id is longer than 128 bytes'
        WHEN p_tenant_id ~ '[\x01-\x1f\x7f-\x9f]' THEN 'tenant_id contains a control character'
        WHEN p_operation_id IS NULL OR p_operation_id = '' THEN 'operation_id is required'
        WHEN octet_length(p_operation_id) > 256 THEN 'operation_id is longer than 256 bytes'
        WHEN p_operation_id ~ '[\x01-\x1f\x7f-\x9f]' THEN 'operation_id contains a control character'
    END
$$;

CREATE FUNCTION idem.valid_hash(p_hash text)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT p_hash IS NOT NULL AND p_hash ~ '^jcs-sha256:[0-9a-f]{64}$' $$;

-- op_class registers what an operation does. effect is a SQL function
-- (tenant_id text, operation_id text, payload jsonb) RETURNS jsonb; NULL means the
-- effect is application code run through idem.claim/idem.complete (Go: ExecuteFunc).
-- retention 'forever' (money) purges only with a business contract reference;
-- 'horizon' (rebuildable projections) purges once the replay horizon is proven.
CREATE TABLE idem.op_class (
    name        text PRIMARY KEY
                CHECK (name ~ '^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$' AND octet_length(name) <= 128),
    effect      regprocedure,
    retention   text NOT NULL DEFAULT 'forever' CHECK (retention IN ('forever', 'horizon')),
    min_age     interval CHECK (min_age IS NULL OR min_age >= interval '0'),
    description text,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- The inbox: one row per identity, committed in the same transaction as the
-- effect and the saved response. No foreign key to op_class on purpose: it would
-- take a share lock on the class row at every insert, a cross-tenant hot spot.
CREATE TABLE idem.inbox (
    tenant_id    text NOT NULL,
    operation_id text NOT NULL,
    op_class     text NOT NULL,
    payload_hash text NOT NULL,
    payload      jsonb NOT NULL,
    response     jsonb, -- NULL only inside the claiming transaction
    created_at   timestamptz NOT NULL DEFAULT now(),
    transport    jsonb, -- topic/partition/offset, webhook delivery id: tracing only
    PRIMARY KEY (tenant_id, operation_id),
    -- The identity rules again, as plain expressions: a writer that bypasses the
    -- functions is held to them too (function calls here cost ~10% of an insert).
    CONSTRAINT inbox_identity_valid CHECK (
        octet_length(tenant_id) BETWEEN 1 AND 128 AND octet_length(operation_id) BETWEEN 1 AND 256
        AND tenant_id !~ '[\x01-\x1f\x7f-\x9f]' AND operation_id !~ '[\x01-\x1f\x7f-\x9f]'),
    CONSTRAINT inbox_hash_form CHECK (payload_hash ~ '^jcs-sha256:[0-9a-f]{64}$')
);

-- A conflict: the same identity arrived with another payload (or class). The
-- stored side and the incoming side are both kept so that no conflict is lost.
-- A repeat of the same conflict (same incoming hash and class) bumps
-- occurrences on the same record.
CREATE TABLE idem.quarantine (
    tenant_id          text NOT NULL,
    operation_id       text NOT NULL,
    incoming_hash      text NOT NULL,
    -- The operators' handle. Conflicts are off the hot path; unique with the
    -- tenant first, so that the table can be distributed by tenant_id.
    id                 bigint GENERATED ALWAYS AS IDENTITY,
    op_class           text NOT NULL,
    stored_hash        text NOT NULL,
    stored_payload     jsonb NOT NULL,
    stored_response    jsonb,
    incoming_class     text NOT NULL,
    incoming_payload   jsonb NOT NULL,
    incoming_transport jsonb,
    detected_app       text,
    detected_user      text,
    first_seen         timestamptz NOT NULL DEFAULT now(),
    last_seen          timestamptz NOT NULL DEFAULT now(),
    occurrences        bigint NOT NULL DEFAULT 1,
    PRIMARY KEY (tenant_id, operation_id, incoming_hash, incoming_class),
    UNIQUE (tenant_id, id),
    CONSTRAINT quarantine_identity_valid CHECK (idem.identity_problem(tenant_id, operation_id) IS NULL),
    CONSTRAINT quarantine_hash_form CHECK (idem.valid_hash(stored_hash) AND idem.valid_hash(incoming_hash))
);

CREATE INDEX quarantine_id_idx ON idem.quarantine (id);
CREATE INDEX quarantine_last_seen_idx ON idem.quarantine (last_seen DESC, id DESC);

-- register_class adds or updates an operation class after checking that the
-- effect has the executor's signature.
CREATE FUNCTION idem.register_class(
    p_name text,
    p_effect regprocedure,
    p_retention text DEFAULT 'forever',
    p_description text DEFAULT NULL
) RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    v_ok boolean;
BEGIN
    IF p_effect IS NOT NULL THEN
        SELECT pronargs = 3 AND proargtypes[0] = 'text'::regtype AND proargtypes[1] = 'text'::regtype
               AND proargtypes[2] = 'jsonb'::regtype AND prorettype = 'jsonb'::regtype AND NOT proretset
        INTO v_ok FROM pg_proc WHERE oid = p_effect;
        IF v_ok IS NOT TRUE THEN
            RAISE EXCEPTION 'effect % must be (tenant_id text, operation_id text, payload jsonb) RETURNS jsonb', p_effect
                USING ERRCODE = 'IX008';
        END IF;
    END IF;
    IF EXISTS (SELECT 1 FROM idem.op_class c WHERE c.name = p_name
               AND c.retention <> coalesce(p_retention, 'forever')) THEN
        -- Never weaken (or silently keep) a retention policy by re-registering.
        RAISE EXCEPTION 'class % is registered with retention %, not %', p_name,
                (SELECT c.retention FROM idem.op_class c WHERE c.name = p_name), coalesce(p_retention, 'forever')
            USING ERRCODE = 'IX008',
                  HINT = 'change a retention policy deliberately: idemctl class set';
    END IF;
    INSERT INTO idem.op_class (name, effect, retention, description)
    VALUES (p_name, p_effect, coalesce(p_retention, 'forever'), p_description)
    ON CONFLICT (name) DO UPDATE
        SET effect = EXCLUDED.effect, description = EXCLUDED.description;
END
$$;

-- check_request raises when a request is malformed, before anything is written.
-- It returns the class's effect (NULL for application-code effects).
CREATE FUNCTION idem.check_request(
    p_tenant_id text, p_operation_id text, p_op_class text, p_payload jsonb, p_payload_hash text
) RETURNS regprocedure
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_problem text;
    v_effect  regprocedure;
BEGIN
    v_problem := idem.identity_problem(p_tenant_id, p_operation_id);
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'invalid identity: %', v_problem
            USING ERRCODE = 'IX001',
                  HINT = 'tenant_id (1-128 bytes) and operation_id (1-256 bytes) are required, without control characters';
    END IF;
    IF NOT idem.valid_hash(p_payload_hash) THEN
        RAISE EXCEPTION 'invalid payload hash %: want jcs-sha256:<64 lowercase hex>', coalesce(quote_literal(p_payload_hash), 'NULL')
            USING ERRCODE = 'IX002',
                  HINT = 'hash the RFC 8785 canonical payload with SHA-256 (idemctl hash prints it)';
    END IF;
    IF p_payload IS NULL THEN
        RAISE EXCEPTION 'payload is required' USING ERRCODE = 'IX006';
    END IF;
    SELECT c.effect INTO v_effect FROM idem.op_class c WHERE c.name = p_op_class;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown operation class %', coalesce(quote_literal(p_op_class), 'NULL')
            USING ERRCODE = 'IX003',
                  HINT = 'register it with idem.register_class, or run idemctl demo init for demo.transfer';
    END IF;
    RETURN v_effect;
END
$$;

-- record_conflict keeps the evidence of a conflicting request. Repeats of the
-- same (identity, incoming hash) increment occurrences on one record.
CREATE FUNCTION idem.record_conflict(
    p_stored idem.inbox, p_op_class text, p_payload jsonb, p_payload_hash text, p_transport jsonb
) RETURNS bigint
LANGUAGE sql
AS $$
    INSERT INTO idem.quarantine AS q (
        tenant_id, operation_id, incoming_hash, op_class,
        stored_hash, stored_payload, stored_response,
        incoming_class, incoming_payload, incoming_transport,
        detected_app, detected_user
    ) VALUES (
        p_stored.tenant_id, p_stored.operation_id, p_payload_hash, p_stored.op_class,
        p_stored.payload_hash, p_stored.payload, p_stored.response,
        p_op_class, p_payload, p_transport,
        current_setting('application_name', true), session_user
    )
    ON CONFLICT (tenant_id, operation_id, incoming_hash, incoming_class) DO UPDATE
        SET occurrences = q.occurrences + 1,
            last_seen = now()
    RETURNING q.id
$$;

-- claim_checked is steps 2-4 of the protocol for one identity, settled by the
-- primary key, for a request that check_request accepted:
--   'claimed'          the identity is new; the caller's transaction now holds the
--                      inbox row and must run the effect, then idem.complete;
--   'already_applied'  same hash and class: the saved response, nothing runs;
--   'conflict'         another hash or class: recorded in idem.quarantine, nothing runs.
-- Under READ COMMITTED a concurrent claimer of the same identity waits on the
-- unique index for the first one to commit or roll back, then reads its row.
-- Under REPEATABLE READ or SERIALIZABLE the loser gets a serialization failure
-- (40001) and must retry the transaction.
CREATE FUNCTION idem.claim_checked(
    p_tenant_id text, p_operation_id text, p_op_class text, p_payload jsonb, p_payload_hash text,
    p_transport jsonb, OUT outcome text, OUT response jsonb, OUT quarantine_id bigint
)
LANGUAGE plpgsql
AS $$
#variable_conflict use_column
DECLARE
    v_row idem.inbox;
BEGIN
    FOR attempt IN 1..3 LOOP
        INSERT INTO idem.inbox (tenant_id, operation_id, op_class, payload_hash, payload, transport)
        VALUES (p_tenant_id, p_operation_id, p_op_class, p_payload_hash, p_payload, p_transport)
        ON CONFLICT (tenant_id, operation_id) DO NOTHING;
        IF FOUND THEN
            outcome := 'claimed';
            RETURN;
        END IF;
        -- The row is committed (READ COMMITTED waited for its writer). Lock it so
        -- that it cannot be purged while this transaction answers from it.
        SELECT * INTO v_row FROM idem.inbox i
        WHERE i.tenant_id = p_tenant_id AND i.operation_id = p_operation_id
        FOR KEY SHARE;
        IF FOUND THEN
            IF v_row.payload_hash = p_payload_hash AND v_row.op_class = p_op_class THEN
                outcome := 'already_applied';
                response := v_row.response;
            ELSE
                outcome := 'conflict';
                quarantine_id := idem.record_conflict(v_row, p_op_class, p_payload, p_payload_hash, p_transport);
            END IF;
            RETURN;
        END IF;
        -- The row went away between the insert and the read: settle again.
    END LOOP;
    RAISE EXCEPTION 'identity (%, %) could not be settled; retry', p_tenant_id, p_operation_id
        USING ERRCODE = 'IX007';
END
$$;

-- pending_claim holds the identities claimed through idem.claim (effects in
-- application code) until idem.complete saves their response, in the same
-- transaction. It is empty outside transactions: a commit with a claim still
-- pending is refused, so a marker without its effect (the brief's first failure
-- mode) can never be committed through the SQL API. idem.execute does not use
-- it: it completes within the same call.
CREATE TABLE idem.pending_claim (
    tenant_id    text NOT NULL,
    operation_id text NOT NULL,
    PRIMARY KEY (tenant_id, operation_id)
);

CREATE FUNCTION idem.pending_claim_check() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM idem.pending_claim p
               WHERE p.tenant_id = NEW.tenant_id AND p.operation_id = NEW.operation_id) THEN
        RAISE EXCEPTION 'identity (%, %) was claimed but never completed: refusing to commit a marker without its effect',
                NEW.tenant_id, NEW.operation_id
            USING ERRCODE = 'IX009',
                  HINT = 'call idem.complete with the effect''s response before COMMIT';
    END IF;
    RETURN NULL;
END
$$;

CREATE CONSTRAINT TRIGGER pending_claim_completed
AFTER INSERT ON idem.pending_claim
DEFERRABLE INITIALLY DEFERRED
FOR EACH ROW EXECUTE FUNCTION idem.pending_claim_check();

-- claim checks a request and claims its identity (see claim_checked). It is the
-- entry point for effects that run in application code: claim, run the effect
-- in the same transaction, then idem.complete; committing without complete is
-- refused (IX009).
CREATE FUNCTION idem.claim(
    p_tenant_id text, p_operation_id text, p_op_class text, p_payload jsonb, p_payload_hash text,
    p_transport jsonb DEFAULT NULL
) RETURNS TABLE (outcome text, response jsonb, quarantine_id bigint)
LANGUAGE plpgsql
AS $$
BEGIN
    PERFORM idem.check_request(p_tenant_id, p_operation_id, p_op_class, p_payload, p_payload_hash);
    SELECT c.outcome, c.response, c.quarantine_id INTO outcome, response, quarantine_id
    FROM idem.claim_checked(p_tenant_id, p_operation_id, p_op_class, p_payload, p_payload_hash, p_transport) c;
    IF outcome = 'claimed' THEN
        INSERT INTO idem.pending_claim (tenant_id, operation_id) VALUES (p_tenant_id, p_operation_id);
    END IF;
    RETURN NEXT;
END
$$;

-- complete saves the response of an identity claimed in this transaction.
CREATE FUNCTION idem.complete(p_tenant_id text, p_operation_id text, p_response jsonb)
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    -- Only a claim of this transaction is pending (the table is empty at commit).
    DELETE FROM idem.pending_claim
    WHERE tenant_id = p_tenant_id AND operation_id = p_operation_id;
    IF FOUND THEN
        UPDATE idem.inbox
        SET response = coalesce(p_response, 'null'::jsonb)
        WHERE tenant_id = p_tenant_id AND operation_id = p_operation_id AND response IS NULL;
    END IF;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'identity (%, %) was not claimed in this transaction', p_tenant_id, p_operation_id
            USING ERRCODE = 'IX005',
                  HINT = 'call idem.claim first, in the same transaction';
    END IF;
END
$$;

-- rebuild_dispatch regenerates idem.run_effect, a function that calls each
-- class's effect by name. Static calls let PostgreSQL cache their plans, which
-- a dynamic EXECUTE cannot (it would re-plan on every call). It runs whenever
-- idem.op_class changes.
CREATE FUNCTION idem.rebuild_dispatch() RETURNS trigger
LANGUAGE plpgsql
AS $rebuild$
DECLARE
    v_branches text := '';
    r record;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('idem.rebuild_dispatch'));
    FOR r IN
        SELECT c.name, format('%I.%I', n.nspname, p.proname) AS fn
        FROM idem.op_class c
        JOIN pg_proc p ON p.oid = c.effect
        JOIN pg_namespace n ON n.oid = p.pronamespace
        ORDER BY c.name
    LOOP
        v_branches := v_branches || format(
            '    IF p_op_class = %L THEN RETURN %s(p_tenant_id, p_operation_id, p_payload); END IF;' || chr(10),
            r.name, r.fn);
    END LOOP;
    EXECUTE format($fn$
CREATE OR REPLACE FUNCTION idem.run_effect(p_op_class text, p_tenant_id text, p_operation_id text, p_payload jsonb)
RETURNS jsonb
LANGUAGE plpgsql
AS $body$
BEGIN
%s    RAISE EXCEPTION 'class %% has no SQL effect', p_op_class USING ERRCODE = 'IX004';
END
$body$$fn$, v_branches);
    RETURN NULL;
END
$rebuild$;

CREATE TRIGGER op_class_dispatch
AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON idem.op_class
FOR EACH STATEMENT EXECUTE FUNCTION idem.rebuild_dispatch();

-- Until a class is registered, run_effect knows none.
CREATE FUNCTION idem.run_effect(p_op_class text, p_tenant_id text, p_operation_id text, p_payload jsonb)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
BEGIN
    RAISE EXCEPTION 'class % has no SQL effect', p_op_class USING ERRCODE = 'IX004';
END
$$;

-- execute is the atomic executor: claim, run the class's SQL effect, save its
-- response, all in the caller's transaction. Outcomes: applied, already_applied,
-- conflict (the conflict record is written in the caller's transaction: commit it).
-- An effect that raises fails the whole call and leaves no inbox row.
CREATE FUNCTION idem.execute(
    p_tenant_id text, p_operation_id text, p_op_class text, p_payload jsonb, p_payload_hash text,
    p_transport jsonb DEFAULT NULL
) RETURNS TABLE (outcome text, response jsonb)
LANGUAGE plpgsql
AS $$
#variable_conflict use_column
DECLARE
    v_claim record;
BEGIN
    IF idem.check_request(p_tenant_id, p_operation_id, p_op_class, p_payload, p_payload_hash) IS NULL THEN
        RAISE EXCEPTION 'class % has its effect in application code', p_op_class
            USING ERRCODE = 'IX004',
                  HINT = 'call idem.claim, run the effect, then idem.complete in one transaction';
    END IF;
    v_claim := idem.claim_checked(p_tenant_id, p_operation_id, p_op_class, p_payload, p_payload_hash, p_transport);
    IF v_claim.outcome <> 'claimed' THEN
        outcome := v_claim.outcome;
        response := v_claim.response;
        RETURN NEXT;
        RETURN;
    END IF;
    response := coalesce(idem.run_effect(p_op_class, p_tenant_id, p_operation_id, p_payload), 'null'::jsonb);
    -- idem.complete, inlined: this transaction inserted the row just above.
    UPDATE idem.inbox i SET response = execute.response
    WHERE i.tenant_id = p_tenant_id AND i.operation_id = p_operation_id;
    outcome := 'applied';
    RETURN NEXT;
END
$$;
