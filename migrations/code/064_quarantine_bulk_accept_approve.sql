-- object: function idem.quarantine_bulk_accept_approve(bigint, text)
-- grant: operator
-- quarantine_bulk_accept_approve is the second pair of eyes on an
-- accept-as-new plan (idem.four_eyes_approve: another person than the
-- planner's, IX122; a login with no person, IX313; only a planned plan,
-- IX121). Returns the plan.
CREATE OR REPLACE FUNCTION idem.quarantine_bulk_accept_approve(p_plan bigint, p_operator text)
RETURNS idem.quarantine_bulk_accept
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_p idem.quarantine_bulk_accept := idem.quarantine_bulk_accept_lock(p_plan);
BEGIN
    PERFORM idem.four_eyes_approve('idem.quarantine_bulk_accept', to_jsonb(v_p), 'bulk accept-as-new plan', p_operator,
                                   'quarantine.bulk_accept_approve',
                                   jsonb_build_object('records', cardinality(v_p.ids), 'rule', v_p.rule),
                                   ARRAY['IX121', 'IX122']);
    SELECT * INTO v_p FROM idem.quarantine_bulk_accept WHERE id = p_plan;
    RETURN v_p;
END
$$;
