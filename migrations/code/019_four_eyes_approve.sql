-- object: function idem.four_eyes_approve(regclass, jsonb, text, text, text, jsonb, text[])
-- four_eyes_approve is the one second pair of eyes every plan shares (purge
-- plans, bulk accept-as-new, governed changes, entry plans). p_plan is the
-- plan's row (to_jsonb), already locked by the caller, from table p_table,
-- which has the columns id, state, planned_person, planned_db_user and the
-- approved_* stamp. The login must map to a person (IX313) other than the
-- planner's, whatever --operator labels say (p_codes[2]); only a planned plan
-- is approved (p_codes[1]). The stamp and one audit row (p_action, with the
-- two persons and p_details) are written here. Returns the approving person.
-- Internal: granted to nobody.
CREATE OR REPLACE FUNCTION idem.four_eyes_approve(
    p_table regclass, p_plan jsonb, p_what text, p_operator text, p_action text, p_details jsonb, p_codes text[]
) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_person text := idem.require_person('approve ' || CASE WHEN p_what ~ '^[aeiou]' THEN 'an ' ELSE 'a ' END || p_what);
    v_id     bigint := (p_plan ->> 'id')::bigint;
BEGIN
    PERFORM idem.check_operator(p_operator, 'approve');
    IF p_plan ->> 'state' <> 'planned' THEN
        RAISE EXCEPTION '% % is %, not planned', p_what, v_id, p_plan ->> 'state' USING ERRCODE = p_codes[1];
    END IF;
    IF v_person = p_plan ->> 'planned_person' THEN
        RAISE EXCEPTION '% % was planned by % (login %): another person must approve it (four-eyes)',
                p_what, v_id, p_plan ->> 'planned_person', p_plan ->> 'planned_db_user'
            USING ERRCODE = p_codes[2];
    END IF;
    EXECUTE format('UPDATE %s SET state = ''approved'', approved_at = now(), approved_by = $1, approved_person = $2,'
                   ' approved_db_user = session_user WHERE id = $3 AND state = ''planned''', p_table)
        USING p_operator, v_person, v_id;
    PERFORM idem.audit_write(p_operator, p_action, (SELECT c.relname FROM pg_class c WHERE c.oid = p_table) || ':' || v_id,
        (jsonb_build_object('person', v_person, 'planned_person', p_plan ->> 'planned_person')
         || coalesce(p_details, '{}'::jsonb))::text);
    RETURN v_person;
END
$$;
