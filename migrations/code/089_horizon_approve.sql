-- object: function idem.horizon_approve(bigint, text)
-- grant: operator
-- horizon_approve records the second pair of eyes (idem.four_eyes_approve:
-- another person than the planner's, IX303; a login with no person, IX313;
-- only a planned plan, IX301, IX302), and not once the plan has expired
-- (IX315). Returns the plan.
CREATE OR REPLACE FUNCTION idem.horizon_approve(p_plan bigint, p_operator text)
RETURNS idem.horizon_plan
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_p idem.horizon_plan;
BEGIN
    v_p := idem.horizon_lock_plan(p_plan);
    IF v_p.state = 'planned' AND v_p.expires_at IS NOT NULL AND v_p.expires_at <= now() THEN
        RAISE EXCEPTION 'purge plan % expired at %: its proof is stale', v_p.id, v_p.expires_at
            USING ERRCODE = 'IX315', HINT = 'cancel it and plan again: idemctl horizon plan';
    END IF;
    PERFORM idem.four_eyes_approve('idem.horizon_plan', to_jsonb(v_p), 'purge plan', p_operator, 'horizon.approve',
                                   '{}', ARRAY['IX302', 'IX303']);
    SELECT * INTO v_p FROM idem.horizon_plan WHERE id = p_plan;
    RETURN v_p;
END
$$;
