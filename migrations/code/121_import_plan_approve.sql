-- object: function idem.import_plan_approve(bigint, text)
-- grant: operator
-- import_plan_approve is the second pair of eyes on an import plan: in the
-- approver's transaction, after they copied the rows they read again from
-- the plan's source into pg_temp.idem_import_check
-- (idem.import_check_open), the plan is approved only if those rows are
-- exactly what it will enter (idem.import_approve_check, IX341 or IX343:
-- nothing approved) and its classes still need no citation it lacks
-- (idem.entry_plan_class_check, IX343); then as every plan (idem.four_eyes_approve: another
-- person than the planner's, IX342; a login with no person, IX313; only a
-- planned plan, IX341). A record plan is approved by
-- idem.entry_plan_approve (IX341 here, naming idemctl record approve).
-- Audited (entry.approve, with the items digest the source gave). Returns
-- the plan.
CREATE OR REPLACE FUNCTION idem.import_plan_approve(p_id bigint, p_operator text)
RETURNS idem.entry_plan
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_person text := idem.require_person('approve an import plan');
    v_p      idem.entry_plan := idem.entry_plan_lock(p_id);
BEGIN
    IF v_p.kind <> 'import' THEN
        RAISE EXCEPTION 'entry plan % is a % plan, not an import: approve it with idemctl record approve %', p_id, v_p.kind, p_id
            USING ERRCODE = 'IX341';
    END IF;
    -- The classes as they are now: what a record cites, an import cites
    -- (idem.entry_plan_class_check, IX343).
    PERFORM idem.entry_plan_class_check(p_id);
    -- The planner's own approval and a plan not planned are refused as
    -- such (below), before the source is compared.
    IF v_p.state = 'planned' AND v_person <> v_p.planned_person THEN
        PERFORM idem.import_approve_check(p_id);
    END IF;
    PERFORM idem.four_eyes_approve('idem.entry_plan', to_jsonb(v_p), 'import plan', p_operator, 'entry.approve',
                                   jsonb_build_object('kind', v_p.kind, 'source_digest', v_p.source_digest,
                                                      'counts', v_p.counts, 'items_digest', encode(v_p.items_digest, 'hex'),
                                                      'checked_against_source', true),
                                   ARRAY['IX341', 'IX342']);
    SELECT * INTO v_p FROM idem.entry_plan WHERE id = p_id;
    RETURN v_p;
END
$$;
