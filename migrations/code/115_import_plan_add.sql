-- object: function idem.import_plan_add(bigint, text, text[], text[], text[], timestamptz[], text[], bytea[])
-- grant: operator
-- import_plan_add adds a batch of at most 50000 items of class p_class to a
-- staging import plan, by its planner only (the same person and login,
-- IX343). The items come as parallel arrays (one element an item): tenant
-- and operation ids, evidence, the original created_at, for a store that
-- kept only its own request hash that hash (64 hex, else NULL), and the
-- item's fingerprint (idem.import_fingerprint: 32 bytes). The plan keeps no
-- payload and no response: the run reads the source again and enters only
-- rows whose fingerprint is the planned one, after checking each as
-- idem.execute checks a request (idem.import_run). Here the identity rules
-- are checked, the created_at must be known and not in the future, and a
-- batch with one bad item adds nothing (IX343 naming it). An identity twice
-- in one plan is refused. Returns how many items the plan holds.
CREATE OR REPLACE FUNCTION idem.import_plan_add(
    p_id bigint, p_class text, p_tenant text[], p_operation text[], p_evidence text[], p_created_at timestamptz[],
    p_store_hash text[], p_fingerprint bytea[]
) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_person text := idem.require_person('fill an import plan');
    v_p      idem.entry_plan := idem.import_plan_for_planner(p_id, v_person, 'filled');
    v_n      integer := coalesce(cardinality(p_tenant), 0);
    v_seq    integer;
    v_added  integer;
    v_bad    record;
BEGIN
    IF to_regclass(format('idem.%I', 'import_stage_' || p_id)) IS NOT NULL THEN
        RAISE EXCEPTION 'import plan % has a stage: it is sealed by idem.import_plan_seal_stage', p_id USING ERRCODE = 'IX343';
    END IF;
    IF v_n NOT BETWEEN 1 AND 50000 OR cardinality(p_operation) <> v_n OR cardinality(p_evidence) <> v_n
       OR cardinality(p_created_at) <> v_n OR cardinality(p_store_hash) <> v_n OR cardinality(p_fingerprint) <> v_n THEN
        RAISE EXCEPTION 'import plan: between 1 and 50000 items a batch, every array as long' USING ERRCODE = 'IX343';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM idem.op_class k WHERE k.name = p_class) THEN
        RAISE EXCEPTION 'import plan: unknown operation class %', quote_nullable(p_class) USING ERRCODE = 'IX343';
    END IF;
    SELECT coalesce(max(e.seq), 0) INTO v_seq FROM idem.entry_item e WHERE e.plan_id = p_id;
    BEGIN
        INSERT INTO idem.entry_item (plan_id, seq, tenant_id, operation_id, op_class, evidence, created_at, store_hash,
                                     hash_function, fingerprint)
        SELECT p_id, v_seq + u.n, u.tenant_id, u.operation_id, p_class, u.evidence, u.created_at, decode(u.store_hash, 'hex'),
               CASE WHEN u.store_hash IS NOT NULL THEN v_p.hash_function END, u.fingerprint
        FROM unnest(p_tenant, p_operation, p_evidence, p_created_at, p_store_hash, p_fingerprint)
             WITH ORDINALITY AS u(tenant_id, operation_id, evidence, created_at, store_hash, fingerprint, n)
        WHERE idem.import_plan_item_problem(u.tenant_id, u.operation_id, u.created_at, u.store_hash, u.fingerprint) IS NULL;
        GET DIAGNOSTICS v_added = ROW_COUNT;
    EXCEPTION WHEN unique_violation THEN
        RAISE EXCEPTION 'import plan: the source holds an identity twice (one plan holds it once)'
            USING ERRCODE = 'IX343', HINT = 'deduplicate the source''s query (one row per tenant and key)';
    END;
    IF v_added < v_n THEN
        SELECT u.n, u.tenant_id, u.operation_id,
               idem.import_plan_item_problem(u.tenant_id, u.operation_id, u.created_at, u.store_hash, u.fingerprint) AS problem
        INTO v_bad
        FROM unnest(p_tenant, p_operation, p_created_at, p_store_hash, p_fingerprint)
             WITH ORDINALITY AS u(tenant_id, operation_id, created_at, store_hash, fingerprint, n)
        WHERE idem.import_plan_item_problem(u.tenant_id, u.operation_id, u.created_at, u.store_hash, u.fingerprint) IS NOT NULL
        ORDER BY u.n LIMIT 1;
        RAISE EXCEPTION 'import plan: item % of the batch (%, %): %', v_bad.n, v_bad.tenant_id, v_bad.operation_id, v_bad.problem
            USING ERRCODE = 'IX343';
    END IF;
    RETURN v_seq + v_n;
END
$$;
