-- object: function idem.quarantine_bulk_accept_approve(bigint, text)
-- grant: operator
-- quarantine_bulk_accept_approve is the second pair of eyes on an
-- accept-as-new plan (idem.four_eyes_approve: another person than the
-- planner's, IX122; a login with no person, IX313; only a planned plan,
-- IX121); a plan with a record whose new id another payload took since
-- (idem.quarantine_accept_clashes) is refused (IX123). Returns the plan.
CREATE OR REPLACE FUNCTION idem.quarantine_bulk_accept_approve(p_plan bigint, p_operator text)
RETURNS idem.quarantine_bulk_accept
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_p   idem.quarantine_bulk_accept := idem.quarantine_bulk_accept_lock(p_plan);
    v_bad record;
BEGIN
    -- A new id taken by another payload since the plan: the plan could never
    -- run that record, so it is not approved as it stands.
    IF v_p.state = 'planned' THEN
        SELECT c.id, c.problem, count(*) OVER () AS n INTO v_bad
        FROM idem.quarantine_accept_clashes(v_p.ids, v_p.rule) c ORDER BY c.id LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'bulk accept-as-new plan %: record % cannot run: %', v_p.id, v_bad.id, v_bad.problem ||
                    CASE WHEN v_bad.n > 1 THEN format(' (and %s more record(s))', v_bad.n - 1) ELSE '' END
                USING ERRCODE = 'IX123',
                      HINT = 'abort it (idemctl quarantine bulk abort) and plan again without those records; nothing was approved';
        END IF;
    END IF;
    PERFORM idem.four_eyes_approve('idem.quarantine_bulk_accept', to_jsonb(v_p), 'bulk accept-as-new plan', p_operator,
                                   'quarantine.bulk_accept_approve',
                                   jsonb_build_object('records', cardinality(v_p.ids), 'rule', v_p.rule),
                                   ARRAY['IX121', 'IX122']);
    SELECT * INTO v_p FROM idem.quarantine_bulk_accept WHERE id = p_plan;
    RETURN v_p;
END
$$;
