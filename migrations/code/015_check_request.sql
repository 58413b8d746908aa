-- object: function idem.check_request(text, text, text, text, text, jsonb)
-- check_request raises when a request is malformed, before anything is
-- written, and returns the class's effect (NULL for application-code effects).
-- The payload is the caller's canonical text (RFC 8785); the database cannot
-- re-canonicalise it, but it checks that the hash is the SHA-256 of exactly
-- these bytes, so a stored payload and its stored hash always agree: a
-- non-canonical text can only cause a false conflict, never a wrong answer.
-- Limits (also in Go: idem.DefaultMaxPayloadBytes, DefaultMaxDepth):
--   payload at most 1 MiB (1048576 bytes) and 64 levels deep  IX011
--   transport a JSON object of at most 16 KiB (16384 bytes)    IX012
-- idem.execute makes the same checks itself, on its hot path; change both
-- (TestExecuteChecksLikeCheckRequest compares them).
CREATE OR REPLACE FUNCTION idem.check_request(
    p_tenant_id text, p_operation_id text, p_op_class text, p_payload text, p_payload_hash text, p_transport jsonb
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
    -- A well-formed request passes this one test, which implies the format
    -- check (the hex of a SHA-256 is 64 lowercase hex digits), cheaper than
    -- the format's regular expression; the checks one by one, each with its
    -- error, run only when it fails, and one of them raises.
    IF p_payload IS NULL OR octet_length(p_payload) > 1048576 OR p_payload_hash IS NULL
       OR p_payload_hash <> 'jcs-sha256:' || encode(sha256(convert_to(p_payload, 'UTF8')), 'hex') THEN
        IF p_payload_hash IS NULL OR p_payload_hash !~ '^jcs-sha256:[0-9a-f]{64}$' THEN
            RAISE EXCEPTION 'invalid payload hash %: want jcs-sha256:<64 lowercase hex>', coalesce(quote_literal(p_payload_hash), 'NULL')
                USING ERRCODE = 'IX002',
                      HINT = 'hash the RFC 8785 canonical payload with SHA-256 (idemctl hash prints it)';
        END IF;
        IF p_payload IS NULL THEN
            RAISE EXCEPTION 'payload is required' USING ERRCODE = 'IX006';
        END IF;
        IF octet_length(p_payload) > 1048576 THEN
            RAISE EXCEPTION 'payload is too large: % bytes, at most 1048576', octet_length(p_payload)
                USING ERRCODE = 'IX011', HINT = 'send a smaller payload; nothing was written';
        END IF;
        -- The hash check (BenchmarkTrustBoundaryCost cuts out this IF and the
        -- comparison above to price it).
        IF p_payload_hash <> 'jcs-sha256:' || encode(sha256(convert_to(p_payload, 'UTF8')), 'hex') THEN
            RAISE EXCEPTION 'payload hash % is not the SHA-256 of the payload sent', p_payload_hash
                USING ERRCODE = 'IX010',
                      HINT = 'send the canonical payload text and the hash of exactly those bytes (idemctl hash --canonical prints both); nothing was written';
        END IF;
    END IF;
    -- Fewer than 65 opening brackets cannot nest 65 deep: the common case
    -- costs no call of json_too_deep (which starts with the same count).
    IF length(p_payload) - length(translate(p_payload, '[{', '')) > 64 AND idem.json_too_deep(p_payload, 64) THEN
        RAISE EXCEPTION 'payload is nested more than 64 levels deep'
            USING ERRCODE = 'IX011', HINT = 'flatten the payload; nothing was written';
    END IF;
    IF p_transport IS NOT NULL AND (jsonb_typeof(p_transport) <> 'object' OR octet_length(p_transport::text) > 16384) THEN
        RAISE EXCEPTION 'transport metadata must be a JSON object of at most 16384 bytes'
            USING ERRCODE = 'IX012', HINT = 'topic, partition, offset, delivery id: tracing only';
    END IF;
    SELECT c.effect INTO v_effect FROM idem.op_class c WHERE c.name = p_op_class;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown operation class %', coalesce(quote_literal(p_op_class), 'NULL')
            USING ERRCODE = 'IX003',
                  HINT = 'the schema owner registers classes with idem.register_class (idemctl demo init registers demo.transfer)';
    END IF;
    RETURN v_effect;
END
$$;
