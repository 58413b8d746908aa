-- object: function idem.import_plan_add(bigint, jsonb)
-- grant: operator
-- import_plan_add adds a batch of at most 10000 items to a staging import
-- plan, by its planner only (the same person and login, IX343). p_items is a
-- JSON array of {tenant_id, operation_id, class, payload (canonical text),
-- payload_hash, response, evidence, created_at} or, for a store that kept
-- only its own request hash, store_hash (64 hex) instead of payload and
-- payload_hash. Every item is checked as idem.execute checks a request
-- (identity, hash of exactly the payload's bytes, limits, class), its
-- created_at must be known and not in the future, and a batch with one bad
-- item adds nothing (IX343 naming it). An identity twice in one plan is
-- refused. Returns how many items the plan holds.
CREATE OR REPLACE FUNCTION idem.import_plan_add(p_id bigint, p_items jsonb)
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_person text := idem.require_person('fill an import plan');
    v_p      idem.entry_plan := idem.entry_plan_lock(p_id);
    v_seq    integer;
    v_bad    record;
BEGIN
    IF v_p.kind <> 'import' OR v_p.state <> 'staging' THEN
        RAISE EXCEPTION 'entry plan % is % (%): items are added to a staging import plan only', p_id, v_p.state, v_p.kind
            USING ERRCODE = 'IX341';
    END IF;
    IF v_person <> v_p.planned_person OR session_user <> v_p.planned_db_user THEN
        RAISE EXCEPTION 'import plan % is filled by its planner only', p_id USING ERRCODE = 'IX343';
    END IF;
    IF p_items IS NULL OR jsonb_typeof(p_items) <> 'array' OR jsonb_array_length(p_items) NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'import plan: between 1 and 10000 items a batch' USING ERRCODE = 'IX343';
    END IF;
    SELECT b.n, b.tenant_id, b.operation_id, c.problem INTO v_bad
    FROM idem.import_batch(p_items) b
    CROSS JOIN LATERAL (SELECT CASE
        WHEN idem.identity_problem(b.tenant_id, b.operation_id) IS NOT NULL THEN idem.identity_problem(b.tenant_id, b.operation_id)
        WHEN NOT EXISTS (SELECT 1 FROM idem.op_class k WHERE k.name = b.class) THEN format('unknown operation class %s', quote_nullable(b.class))
        WHEN b.created_at IS NULL THEN 'created_at is unknown'
        WHEN b.created_at > now() THEN format('created_at %s is in the future', b.created_at)
        WHEN b.response IS NULL THEN 'no response'
        WHEN idem.text_problem('evidence', b.evidence, 1024) IS NOT NULL THEN idem.text_problem('evidence', b.evidence, 1024)
        WHEN b.payload IS NULL AND b.payload_hash IS NULL THEN
            CASE WHEN b.store_hash IS NULL OR b.store_hash !~ '^[0-9a-f]{64}$' THEN 'neither a payload nor the store''s hash (64 lowercase hex)' END
        WHEN b.payload IS NULL OR b.store_hash IS NOT NULL THEN 'a payload and its hash, or the store''s hash alone'
        WHEN b.payload_hash IS NULL OR b.payload_hash !~ '^jcs-sha256:[0-9a-f]{64}$' THEN 'payload hash is not jcs-sha256:<64 hex>'
        WHEN octet_length(b.payload) > 1048576 THEN format('payload is too large: %s bytes, at most 1048576', octet_length(b.payload))
        WHEN b.payload_hash <> 'jcs-sha256:' || encode(sha256(convert_to(b.payload, 'UTF8')), 'hex') THEN 'payload hash is not the SHA-256 of the payload'
        WHEN idem.json_too_deep(b.payload, 64) THEN 'payload is nested more than 64 levels deep'
        WHEN jsonb_typeof(b.payload::jsonb) IS NULL THEN 'payload is not JSON' -- the cast raises on text that is not JSON
        END AS problem) c
    WHERE c.problem IS NOT NULL
    ORDER BY b.n
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'import plan: item % of the batch (%, %): %', v_bad.n, v_bad.tenant_id, v_bad.operation_id, v_bad.problem
            USING ERRCODE = 'IX343';
    END IF;
    SELECT coalesce(max(e.seq), 0) INTO v_seq FROM idem.entry_item e WHERE e.plan_id = p_id;
    BEGIN
        INSERT INTO idem.entry_item (plan_id, seq, tenant_id, operation_id, op_class, payload, payload_hash, response,
                                     evidence, created_at, store_hash, hash_function)
        SELECT p_id, v_seq + b.n, b.tenant_id, b.operation_id, b.class, b.payload, b.payload_hash, b.response,
               b.evidence, b.created_at, decode(b.store_hash, 'hex'),
               CASE WHEN b.store_hash IS NOT NULL THEN v_p.hash_function END
        FROM idem.import_batch(p_items) b
        ORDER BY b.n;
    EXCEPTION WHEN unique_violation THEN
        RAISE EXCEPTION 'import plan: the source holds an identity twice (one plan holds it once)'
            USING ERRCODE = 'IX343', HINT = 'deduplicate the source''s query (one row per tenant and key)';
    END;
    RETURN v_seq + jsonb_array_length(p_items);
END
$$;
