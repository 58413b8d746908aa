-- object: function idem.quarantine_bulk_accept_approve(bigint, text)
-- grant: operator
-- quarantine_bulk_accept_approve is the second pair of eyes on a bulk
-- accept-as-new: the login must map to a person (IX313) other than the
-- planner's (IX122), whatever --operator labels say; only a planned plan is
-- approved (IX121). Recorded in the audit log. Returns the plan.
CREATE OR REPLACE FUNCTION idem.quarantine_bulk_accept_approve(p_plan bigint, p_operator text)
RETURNS idem.quarantine_bulk_accept
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_person text := idem.require_person('approve a bulk accept-as-new');
    v_p      idem.quarantine_bulk_accept;
BEGIN
    PERFORM idem.check_operator(p_operator, 'approve');
    v_p := idem.quarantine_bulk_accept_lock(p_plan);
    IF v_p.state <> 'planned' THEN
        RAISE EXCEPTION 'bulk accept-as-new plan % is %, not planned', v_p.id, v_p.state USING ERRCODE = 'IX121';
    END IF;
    IF v_person = v_p.planned_person THEN
        RAISE EXCEPTION 'bulk accept-as-new plan % was planned by % (login %): another person must approve it (four-eyes)',
                v_p.id, v_p.planned_person, v_p.planned_db_user
            USING ERRCODE = 'IX122';
    END IF;
    UPDATE idem.quarantine_bulk_accept
    SET state = 'approved', approved_at = now(), approved_by = p_operator, approved_person = v_person,
        approved_db_user = session_user
    WHERE id = p_plan
    RETURNING * INTO v_p;
    PERFORM idem.audit_write(p_operator, 'quarantine.bulk_accept_approve', 'quarantine_bulk_accept:' || p_plan,
        jsonb_build_object('person', v_person, 'planned_person', v_p.planned_person, 'records', cardinality(v_p.ids),
                           'rule', v_p.rule)::text);
    RETURN v_p;
END
$$;
