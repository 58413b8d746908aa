-- object: function idem.import_plan_begin(text, text, text, text, text, text)
-- grant: operator
-- import_plan_begin starts an entry plan of kind 'import' (an existing
-- idempotency store adopted) in state 'staging': its planner fills it with
-- idem.import_plan_add and seals it with idem.import_plan_seal, in one
-- transaction when idemctl does it. p_hash_function declares how a store
-- that kept only its own request hash computed it (sha256-raw,
-- sha256-sorted-json), NULL when undeclared. p_contract and p_correction
-- are what the plan cites, as a record plan does: its class is checked
-- against them when it is sealed, approved and run
-- (idem.entry_plan_class_check). The login must map to a person (IX313).
-- Returns the plan.
CREATE OR REPLACE FUNCTION idem.import_plan_begin(
    p_source text, p_hash_function text, p_operator text, p_reason text, p_contract text DEFAULT NULL, p_correction text DEFAULT NULL
)
RETURNS idem.entry_plan
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_person  text := idem.require_person('plan an import');
    v_problem text := idem.decision_input_problem(p_operator, p_reason);
    v_p       idem.entry_plan;
BEGIN
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'import plan: %', v_problem USING ERRCODE = 'IX343', HINT = 'pass --reason';
    END IF;
    IF p_hash_function IS NOT NULL AND p_hash_function NOT IN ('sha256-raw', 'sha256-sorted-json') THEN
        RAISE EXCEPTION 'import plan: hash function % is neither sha256-raw nor sha256-sorted-json', quote_literal(p_hash_function)
            USING ERRCODE = 'IX343';
    END IF;
    INSERT INTO idem.entry_plan (kind, state, source, source_digest, items, counts, sample, reason, hash_function,
                                 contract, correction, planned_by, planned_person, planned_db_user)
    VALUES ('import', 'staging', p_source, 'sha256:' || repeat('0', 64), 0, '{}', '[]', p_reason, p_hash_function,
            nullif(btrim(p_contract), ''), nullif(btrim(p_correction), ''), p_operator, v_person, session_user)
    RETURNING * INTO v_p;
    RETURN v_p;
END
$$;
