-- object: function idem.execute(text, text, text, text, text, jsonb)
-- grant: app, operator
-- execute is the atomic executor: claim the identity, run the class's SQL
-- effect, save its response, all in the caller's transaction. The payload is
-- the caller's canonical JSON text and payload_hash its jcs-sha256 hash, which
-- the database recomputes (IX010 on a mismatch, nothing written, on every
-- path). Outcomes:
--   applied          the identity was new: the effect ran, its response is saved;
--   already_applied  same identity, same hash and class: the saved response;
--   purged           applied once, its body purged under a proven horizon;
--   conflict         another hash or class: nothing ran; the conflict is in
--                    idem.quarantine (quarantine_id) as part of the caller's
--                    transaction: commit it.
-- An effect that raises fails the whole call and leaves no inbox row.
--
-- A new operation is the hot path, taken in this one function: PL/pgSQL
-- calls are not inlined, and each pays its lookup, its EXECUTE check and
-- its expressions' set-up again in every transaction. So the request checks
-- are idem.check_request's, in the same order with the same errors (kept in
-- step with it: TestExecuteChecksLikeCheckRequest), a new identity is
-- claimed here, and everything else (a replay, a conflict, a race lost) is
-- idem.settle's. The effect runs through idem.run_effect, which checks it
-- again first (IX016).
CREATE OR REPLACE FUNCTION idem.execute(
    tenant_id text, operation_id text, op_class text, payload text, payload_hash text, transport jsonb DEFAULT NULL
) RETURNS TABLE (outcome text, response jsonb, quarantine_id bigint)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    v_problem text;
    v_effect  regprocedure;
    v_claimed boolean;
    v_settle  record;
BEGIN
    -- A well-formed request passes this one test, which implies the hash's
    -- format (the hex of a SHA-256 is 64 lowercase hex digits: the format's
    -- regular expression cost more than all the other checks together) and
    -- is set up once per transaction instead of one expression a check. It
    -- says what a valid request is, with as few function calls as it can
    -- (each is set up, its EXECUTE right checked, in every transaction): the
    -- identity's rules are idem.identity_problem's (the regular expression
    -- also says "not empty"), and anything not TRUE, a NULL included, takes
    -- the checks one by one, in idem.check_request's order with its errors
    -- (so do payloads with over 64 brackets, for the depth check).
    IF (octet_length(tenant_id) <= 128 AND tenant_id ~ '^[^\x01-\x1f\x7f-\x9f]+$'
        AND octet_length(operation_id) <= 256 AND operation_id ~ '^[^\x01-\x1f\x7f-\x9f]+$'
        AND octet_length(payload) <= 1048576
        AND payload_hash = 'jcs-sha256:' || encode(sha256(convert_to(payload, 'UTF8')), 'hex')
        AND length(payload) - length(translate(payload, '[{', '')) <= 64
        AND (transport IS NULL OR (jsonb_typeof(transport) = 'object' AND octet_length(transport::text) <= 16384))) IS NOT TRUE THEN
        v_problem := idem.identity_problem(tenant_id, operation_id);
        IF v_problem IS NOT NULL THEN
            RAISE EXCEPTION 'invalid identity: %', v_problem
                USING ERRCODE = 'IX001',
                      HINT = 'tenant_id (1-128 bytes) and operation_id (1-256 bytes) are required, without control characters';
        END IF;
        IF payload_hash IS NULL OR payload_hash !~ '^jcs-sha256:[0-9a-f]{64}$' THEN
            RAISE EXCEPTION 'invalid payload hash %: want jcs-sha256:<64 lowercase hex>', coalesce(quote_literal(payload_hash), 'NULL')
                USING ERRCODE = 'IX002',
                      HINT = 'hash the RFC 8785 canonical payload with SHA-256 (idemctl hash prints it)';
        END IF;
        IF payload IS NULL THEN
            RAISE EXCEPTION 'payload is required' USING ERRCODE = 'IX006';
        END IF;
        IF octet_length(payload) > 1048576 THEN
            RAISE EXCEPTION 'payload is too large: % bytes, at most 1048576', octet_length(payload)
                USING ERRCODE = 'IX011', HINT = 'send a smaller payload; nothing was written';
        END IF;
        -- The hash check (BenchmarkTrustBoundaryCost cuts out this IF and the
        -- comparison above to price it).
        IF payload_hash <> 'jcs-sha256:' || encode(sha256(convert_to(payload, 'UTF8')), 'hex') THEN
            RAISE EXCEPTION 'payload hash % is not the SHA-256 of the payload sent', payload_hash
                USING ERRCODE = 'IX010',
                      HINT = 'send the canonical payload text and the hash of exactly those bytes (idemctl hash --canonical prints both); nothing was written';
        END IF;
        IF length(payload) - length(translate(payload, '[{', '')) > 64 AND idem.json_too_deep(payload, 64) THEN
            RAISE EXCEPTION 'payload is nested more than 64 levels deep'
                USING ERRCODE = 'IX011', HINT = 'flatten the payload; nothing was written';
        END IF;
        IF transport IS NOT NULL AND (jsonb_typeof(transport) <> 'object' OR octet_length(transport::text) > 16384) THEN
            RAISE EXCEPTION 'transport metadata must be a JSON object of at most 16384 bytes'
                USING ERRCODE = 'IX012', HINT = 'topic, partition, offset, delivery id: tracing only';
        END IF;
    END IF;
    -- The effect is checked again before it runs, by idem.run_effect.
    SELECT c.effect INTO v_effect FROM idem.op_class c WHERE c.name = op_class;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown operation class %', coalesce(quote_literal(op_class), 'NULL')
            USING ERRCODE = 'IX003',
                  HINT = 'the schema owner registers classes with idem.register_class (idemctl demo init registers demo.transfer)';
    END IF;
    IF v_effect IS NULL THEN
        RAISE EXCEPTION 'class % has its effect in application code', op_class
            USING ERRCODE = 'IX004',
                  HINT = 'call idem.claim, run the effect, then idem.complete in one transaction';
    END IF;
    -- A new identity: probed, then claimed (the primary key, the table's
    -- one unique index, settles a race). A replay stays a read, and costs
    -- what it did (an INSERT that meets the row first cost a replay about a
    -- fifth more, measured). Anything but a new identity is idem.settle's.
    -- (Probing it in the class's statement saved 3,700 instructions, but on
    -- Citus a delegated call refuses a statement that joins the reference
    -- table op_class to the tenant's shard.)
    v_claimed := false;
    PERFORM FROM idem.identity i WHERE i.tenant_id = execute.tenant_id AND i.operation_id = execute.operation_id;
    IF NOT FOUND THEN
        INSERT INTO idem.identity AS i (tenant_id, operation_id, op_class, payload_digest)
        VALUES (execute.tenant_id, execute.operation_id, execute.op_class, decode(substr(payload_hash, 12), 'hex'))
        ON CONFLICT DO NOTHING;
        v_claimed := FOUND;
    END IF;
    IF NOT v_claimed THEN
        v_settle := idem.settle(tenant_id, operation_id, op_class, payload, payload_hash, transport, false);
        IF v_settle.outcome <> 'claimed' THEN
            outcome := v_settle.outcome;
            response := v_settle.response;
            quarantine_id := v_settle.quarantine_id;
            RETURN NEXT;
            RETURN;
        END IF;
    END IF;
    response := coalesce(idem.run_effect(op_class, tenant_id, operation_id, payload::jsonb, v_effect), 'null'::jsonb);
    INSERT INTO idem.inbox_body (tenant_id, operation_id, created_at, op_class, payload, response, transport)
    VALUES (execute.tenant_id, execute.operation_id, now(), execute.op_class, execute.payload, execute.response,
            execute.transport);
    outcome := 'applied';
    RETURN NEXT;
END
$$;
