-- object: function idem.import_plan_seal_digest(bigint, text, jsonb, text, bytea, jsonb, jsonb)
-- grant: operator
-- import_plan_seal_digest closes a staging import plan that holds no item
-- row, by its planner only (IX343): instead of an item a row, it keeps one
-- digest of all the items in the order the planner read them
-- (p_items_digest, 32 bytes: sha256 over the sha256 of each run of 4096
-- items, an item being its fingerprint (idem.import_fingerprint), then its
-- evidence, length-prefixed), what the planner counted of them (p_items:
-- items, tenants, hash_only, oldest, newest, class) and a sample of at most
-- five (tenant_id, operation_id, created_at, evidence). The run reads the
-- source again in the same order and enters its rows only if their digest,
-- counts and sample are these (idem.import_run_digest). Otherwise as
-- idem.import_plan_seal: the source's digest and counts, the cursor,
-- the class checked against what the plan cites, 'planned', audited
-- (entry.plan). Not on Citus (IX343: plan an item a row
-- there). Returns the plan.
CREATE OR REPLACE FUNCTION idem.import_plan_seal_digest(
    p_id bigint, p_source_digest text, p_source_counts jsonb, p_cursor text, p_items_digest bytea, p_items jsonb, p_sample jsonb
) RETURNS idem.entry_plan
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_person text := idem.require_person('seal an import plan');
    v_p      idem.entry_plan := idem.import_plan_for_planner(p_id, v_person, 'sealed');
    v_counts jsonb;
    v_sample jsonb;
    v_class  text := p_items ->> 'class';
BEGIN
    IF idem.citus_distributed() THEN
        RAISE EXCEPTION 'import plan %: on Citus an import plan keeps an item a row (idem.import_plan_add)', p_id
            USING ERRCODE = 'IX343';
    END IF;
    IF EXISTS (SELECT 1 FROM idem.entry_item e WHERE e.plan_id = p_id)
       OR to_regclass(format('idem.%I', 'import_stage_' || p_id)) IS NOT NULL THEN
        RAISE EXCEPTION 'import plan % holds item rows or a stage: seal it with idem.import_plan_seal or _seal_stage', p_id USING ERRCODE = 'IX343';
    END IF;
    PERFORM idem.import_seal_check(p_source_digest, p_source_counts);
    IF p_items_digest IS NULL OR octet_length(p_items_digest) <> 32 THEN
        RAISE EXCEPTION 'import plan: the items digest is 32 bytes' USING ERRCODE = 'IX343';
    END IF;
    IF jsonb_typeof(p_items) IS DISTINCT FROM 'object' OR jsonb_typeof(p_items -> 'items') IS DISTINCT FROM 'number'
       OR (p_items ->> 'items')::numeric < 1 OR (p_items ->> 'items')::numeric > 2147483647
       OR jsonb_typeof(p_items -> 'tenants') IS DISTINCT FROM 'number' OR jsonb_typeof(p_items -> 'hash_only') IS DISTINCT FROM 'number'
       OR (p_items ->> 'oldest')::timestamptz IS NULL OR (p_items ->> 'newest')::timestamptz IS NULL THEN
        RAISE EXCEPTION 'import plan %: nothing to import, or the item counts are not {items, tenants, hash_only, oldest, newest, class}', p_id
            USING ERRCODE = 'IX343';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM idem.op_class k WHERE k.name = v_class) THEN
        RAISE EXCEPTION 'import plan: unknown operation class %', quote_nullable(v_class) USING ERRCODE = 'IX343';
    END IF;
    IF jsonb_typeof(p_sample) IS DISTINCT FROM 'array' OR jsonb_array_length(p_sample) NOT BETWEEN 1 AND 5
       OR EXISTS (SELECT 1 FROM jsonb_array_elements(p_sample) x
                  WHERE jsonb_typeof(x) <> 'object' OR x ->> 'tenant_id' IS NULL OR x ->> 'operation_id' IS NULL
                     OR x ->> 'created_at' IS NULL OR x ->> 'evidence' IS NULL
                     OR idem.identity_problem(x ->> 'tenant_id', x ->> 'operation_id') IS NOT NULL
                     OR octet_length(x ->> 'evidence') > 1024) THEN
        RAISE EXCEPTION 'import plan: the sample is one to five items of the plan {tenant_id, operation_id, created_at, evidence}'
            USING ERRCODE = 'IX343';
    END IF;
    SELECT jsonb_agg(jsonb_build_object('tenant_id', x ->> 'tenant_id', 'operation_id', x ->> 'operation_id', 'class', v_class,
                                        'created_at', (x ->> 'created_at')::timestamptz, 'evidence', x ->> 'evidence') ORDER BY n)
    INTO v_sample
    FROM jsonb_array_elements(p_sample) WITH ORDINALITY AS s(x, n);
    v_counts := jsonb_build_object('items', (p_items ->> 'items')::bigint, 'tenants', (p_items ->> 'tenants')::bigint,
                                   'hash_only', (p_items ->> 'hash_only')::bigint,
                                   'oldest', (p_items ->> 'oldest')::timestamptz, 'newest', (p_items ->> 'newest')::timestamptz,
                                   'classes', jsonb_build_object(v_class, (p_items ->> 'items')::bigint),
                                   'source', coalesce(p_source_counts, '{}'::jsonb));
    UPDATE idem.entry_plan
    SET state = 'planned', source_digest = p_source_digest, cursor = p_cursor, items = (v_counts ->> 'items')::integer,
        counts = v_counts, sample = v_sample, items_digest = p_items_digest
    WHERE id = p_id
    RETURNING * INTO v_p;
    PERFORM idem.entry_plan_class_check(p_id); -- its class against what the plan cites (--contract, --correction)
    PERFORM idem.audit_write(v_p.planned_by, 'entry.plan', 'entry_plan:' || v_p.id,
        jsonb_build_object('kind', 'import', 'source', v_p.source, 'source_digest', p_source_digest, 'counts', v_counts,
                           'items_digest', encode(p_items_digest, 'hex'), 'cursor', p_cursor,
                           'hash_function', v_p.hash_function, 'contract', v_p.contract, 'correction', v_p.correction, 'reason', v_p.reason, 'person', v_person)::text);
    RETURN v_p;
END
$$;
