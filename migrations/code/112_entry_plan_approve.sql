-- object: function idem.entry_plan_approve(bigint, text)
-- grant: operator
-- entry_plan_approve is the second pair of eyes on identities that enter
-- without their effect (idem.four_eyes_approve: another person than the
-- planner's, IX342; a login with no person, IX313; only a planned plan,
-- IX341). The plan's classes (record or import) are checked again as
-- they are now (idem.entry_plan_class_check, IX343). Returns the plan.
CREATE OR REPLACE FUNCTION idem.entry_plan_approve(p_id bigint, p_operator text)
RETURNS idem.entry_plan
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_p idem.entry_plan := idem.entry_plan_lock(p_id);
BEGIN
    PERFORM idem.entry_plan_class_check(p_id);
    PERFORM idem.four_eyes_approve('idem.entry_plan', to_jsonb(v_p), 'entry plan', p_operator, 'entry.approve',
                                   jsonb_build_object('kind', v_p.kind, 'source_digest', v_p.source_digest,
                                                      'counts', v_p.counts),
                                   ARRAY['IX341', 'IX342']);
    SELECT * INTO v_p FROM idem.entry_plan WHERE id = p_id;
    RETURN v_p;
END
$$;
