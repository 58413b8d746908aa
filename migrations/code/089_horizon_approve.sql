-- object: function idem.horizon_approve(bigint, text)
-- grant: operator
-- horizon_approve records the second pair of eyes. Four-eyes compares
-- persons: the login must map to a person (IX313) other than the planner's
-- (IX303), whatever --operator labels say; only a planned plan is approved
-- (IX301, IX302), and not once it has expired (IX315). Recorded in the audit
-- log. Returns the plan.
CREATE OR REPLACE FUNCTION idem.horizon_approve(p_plan bigint, p_operator text)
RETURNS idem.horizon_plan
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_person text := idem.require_person('approve a purge');
    v_p      idem.horizon_plan;
BEGIN
    PERFORM idem.check_operator(p_operator, 'approve');
    v_p := idem.horizon_lock_plan(p_plan);
    IF v_p.state <> 'planned' THEN
        RAISE EXCEPTION 'purge plan % is %, not planned', v_p.id, v_p.state USING ERRCODE = 'IX302';
    END IF;
    IF v_p.expires_at IS NOT NULL AND v_p.expires_at <= now() THEN
        RAISE EXCEPTION 'purge plan % expired at %: its proof is stale', v_p.id, v_p.expires_at
            USING ERRCODE = 'IX315', HINT = 'cancel it and plan again: idemctl horizon plan';
    END IF;
    IF v_person = v_p.planned_person THEN
        RAISE EXCEPTION 'purge plan % was planned by % (login %): another person must approve it (four-eyes)',
                v_p.id, v_p.planned_person, v_p.planned_db_user
            USING ERRCODE = 'IX303';
    END IF;
    UPDATE idem.horizon_plan
    SET state = 'approved', approved_at = now(), approved_by = p_operator, approved_person = v_person,
        approved_db_user = session_user
    WHERE id = p_plan
    RETURNING * INTO v_p;
    PERFORM idem.audit_write(p_operator, 'horizon.approve', 'horizon_plan:' || p_plan,
        jsonb_build_object('person', v_person, 'planned_person', v_p.planned_person)::text);
    RETURN v_p;
END
$$;
