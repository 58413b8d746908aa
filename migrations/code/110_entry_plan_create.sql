-- object: function idem.entry_plan_create(text, text, text, jsonb, text, text, text, text)
-- grant: operator
-- entry_plan_create plans identities that enter the inbox without their
-- effect running, of kind 'record' (outcomes known from outside, recorded
-- by hand); an import (an existing store adopted, with the original ages)
-- is planned by idem.import_plan_begin, _add and _seal instead. p_source names where they
-- come from and p_source_digest is its sha256; p_items is a JSON array of
-- {tenant_id, operation_id, class, payload (canonical text), payload_hash,
-- response, evidence}, at most 10000, each checked as idem.execute checks a
-- request (hash, limits, class); a response that is absent or JSON null is
-- refused (IX343). A money class needs p_contract, a class with a SQL
-- effect p_correction too (who writes its ledger rows), IX343
-- (idem.entry_citation_problem).
-- The plan keeps the counts and a sample; nothing enters until another
-- person approves (idem.entry_plan_approve) and it runs (idem.entry_plan_run).
-- The login must map to a person (IX313). Audited. Returns the plan.
CREATE OR REPLACE FUNCTION idem.entry_plan_create(
    p_kind text, p_source text, p_source_digest text, p_items jsonb, p_operator text, p_reason text,
    p_contract text, p_correction text
) RETURNS idem.entry_plan
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_person text := idem.require_person('plan identities that enter without their effect');
    v_problem text := idem.decision_input_problem(p_operator, p_reason);
    v_item   jsonb;
    v_seq    integer := 0;
    v_cite   text;
    v_p      idem.entry_plan;
BEGIN
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'entry plan: %', v_problem USING ERRCODE = 'IX343', HINT = 'pass --reason';
    END IF;
    IF p_kind IS NULL OR p_kind <> 'record' THEN
        RAISE EXCEPTION 'entry plan: kind % is not record (an import is planned by idem.import_plan_begin, _add and _seal)',
                coalesce(quote_literal(p_kind), 'NULL')
            USING ERRCODE = 'IX343';
    END IF;
    IF p_source_digest IS NULL OR p_source_digest !~ '^sha256:[0-9a-f]{64}$' THEN
        RAISE EXCEPTION 'entry plan: the source digest must be sha256:<64 hex>' USING ERRCODE = 'IX343';
    END IF;
    IF p_items IS NULL OR jsonb_typeof(p_items) <> 'array' OR jsonb_array_length(p_items) NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'entry plan: between 1 and 10000 items' USING ERRCODE = 'IX343';
    END IF;
    INSERT INTO idem.entry_plan (kind, source, source_digest, items, counts, sample, reason, contract, correction,
                                 planned_by, planned_person, planned_db_user)
    VALUES (p_kind, p_source, p_source_digest, jsonb_array_length(p_items), '{}', '[]', p_reason,
            nullif(btrim(p_contract), ''), nullif(btrim(p_correction), ''), p_operator, v_person, session_user)
    RETURNING * INTO v_p;
    FOR v_item IN SELECT value FROM jsonb_array_elements(p_items) LOOP
        v_seq := v_seq + 1;
        PERFORM idem.check_request(v_item ->> 'tenant_id', v_item ->> 'operation_id', v_item ->> 'class',
                                v_item ->> 'payload', v_item ->> 'payload_hash', NULL);
        v_cite := idem.entry_citation_problem('record', v_item ->> 'class', v_p.contract, v_p.correction);
        IF v_cite IS NOT NULL THEN
            RAISE EXCEPTION 'entry plan: item %: %', v_seq, v_cite USING ERRCODE = 'IX343';
        END IF;
        -- JSON null is no response: a retry would be answered already_applied with nothing.
        IF v_item -> 'response' IS NULL OR jsonb_typeof(v_item -> 'response') = 'null'
           OR idem.text_problem('evidence', v_item ->> 'evidence', 1024) IS NOT NULL THEN
            RAISE EXCEPTION 'entry plan: item % needs a response (JSON null is none) and evidence (e.g. the provider''s reference)', v_seq
                USING ERRCODE = 'IX343';
        END IF;
        INSERT INTO idem.entry_item (plan_id, seq, tenant_id, operation_id, op_class, payload, payload_hash, response, evidence)
        VALUES (v_p.id, v_seq, v_item ->> 'tenant_id', v_item ->> 'operation_id', v_item ->> 'class', v_item ->> 'payload',
                v_item ->> 'payload_hash', v_item -> 'response', v_item ->> 'evidence');
    END LOOP;
    UPDATE idem.entry_plan
    SET counts = (SELECT jsonb_build_object('items', count(*), 'tenants', count(DISTINCT tenant_id),
                                            'classes', (SELECT jsonb_object_agg(op_class, n) FROM (
                                                SELECT op_class, count(*) AS n FROM idem.entry_item
                                                WHERE plan_id = v_p.id GROUP BY op_class) c))
                  FROM idem.entry_item WHERE plan_id = v_p.id),
        sample = (SELECT coalesce(jsonb_agg(jsonb_build_object('tenant_id', tenant_id, 'operation_id', operation_id,
                                                               'class', op_class, 'evidence', evidence) ORDER BY seq), '[]')
                  FROM idem.entry_item WHERE plan_id = v_p.id AND seq <= 5)
    WHERE id = v_p.id
    RETURNING * INTO v_p;
    PERFORM idem.audit_write(p_operator, 'entry.plan', 'entry_plan:' || v_p.id,
        jsonb_build_object('kind', p_kind, 'source', p_source, 'source_digest', p_source_digest, 'counts', v_p.counts,
                           'contract', v_p.contract, 'correction', v_p.correction, 'reason', p_reason,
                           'person', v_person)::text);
    RETURN v_p;
END
$$;
