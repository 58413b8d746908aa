-- object: function idem.import_plan_seal(bigint, text, jsonb, text)
-- grant: operator
-- import_plan_seal closes a staging import plan, by its planner only
-- (IX343): it records the source's digest (sha256:<64 hex>), what the
-- planner read of the source (p_source_counts: rows read, ambiguous,
-- invalid, as idemctl counted them) and the cursor for the next import's
-- --since, computes the counts (items, tenants, classes, hash-only items,
-- oldest and newest created_at) and a sample from the items it holds, and
-- makes the plan 'planned': another person approves exactly these items
-- (idem.entry_plan_approve), then it runs (idem.entry_plan_run). A plan with
-- no item is refused (IX343), and so is one whose class needs what it does
-- not cite (idem.entry_plan_class_check, IX343). Audited (entry.plan).
-- Returns the plan.
CREATE OR REPLACE FUNCTION idem.import_plan_seal(p_id bigint, p_source_digest text, p_source_counts jsonb, p_cursor text)
RETURNS idem.entry_plan
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_person text := idem.require_person('seal an import plan');
    v_p      idem.entry_plan := idem.import_plan_for_planner(p_id, v_person, 'sealed');
    v_counts jsonb;
BEGIN
    IF to_regclass(format('idem.%I', 'import_stage_' || p_id)) IS NOT NULL THEN
        RAISE EXCEPTION 'import plan % has a stage: it is sealed by idem.import_plan_seal_stage', p_id USING ERRCODE = 'IX343';
    END IF;
    PERFORM idem.import_seal_check(p_source_digest, p_source_counts);
    SELECT jsonb_build_object('items', count(*), 'tenants', count(DISTINCT e.tenant_id),
                              'hash_only', count(e.store_hash),
                              'oldest', min(e.created_at), 'newest', max(e.created_at),
                              'classes', (SELECT jsonb_object_agg(c.op_class, c.n) FROM (
                                  SELECT e2.op_class, count(*) AS n FROM idem.entry_item e2
                                  WHERE e2.plan_id = p_id GROUP BY e2.op_class) c),
                              'source', coalesce(p_source_counts, '{}'::jsonb))
    INTO v_counts
    FROM idem.entry_item e WHERE e.plan_id = p_id;
    IF (v_counts ->> 'items')::bigint = 0 THEN
        RAISE EXCEPTION 'import plan %: nothing to import', p_id USING ERRCODE = 'IX343';
    END IF;
    UPDATE idem.entry_plan
    SET state = 'planned', source_digest = p_source_digest, cursor = p_cursor, items = (v_counts ->> 'items')::integer,
        counts = v_counts,
        sample = (SELECT coalesce(jsonb_agg(jsonb_build_object('tenant_id', e.tenant_id, 'operation_id', e.operation_id,
                                                               'class', e.op_class, 'created_at', e.created_at,
                                                               'evidence', e.evidence) ORDER BY e.seq), '[]')
                  FROM idem.entry_item e WHERE e.plan_id = p_id AND e.seq <= 5)
    WHERE id = p_id
    RETURNING * INTO v_p;
    PERFORM idem.entry_plan_class_check(p_id); -- its class against what the plan cites (--contract, --correction)
    PERFORM idem.audit_write(v_p.planned_by, 'entry.plan', 'entry_plan:' || v_p.id,
        jsonb_build_object('kind', 'import', 'source', v_p.source, 'source_digest', p_source_digest, 'counts', v_counts,
                           'cursor', p_cursor, 'hash_function', v_p.hash_function, 'contract', v_p.contract, 'correction', v_p.correction, 'reason', v_p.reason,
                           'person', v_person)::text);
    RETURN v_p;
END
$$;
