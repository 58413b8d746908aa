-- object: function idem.person_remove(text)
-- person_remove forgets one login mapping (only the schema owner may call
-- it). The person stays, for the plans and decisions that name it.
CREATE OR REPLACE FUNCTION idem.person_remove(p_login text)
RETURNS idem.person_login
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_row idem.person_login;
BEGIN
    DELETE FROM idem.person_login WHERE login_pattern = p_login RETURNING * INTO v_row;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'login % is not mapped to a person', coalesce(quote_literal(p_login), 'NULL')
            USING ERRCODE = 'IX401', HINT = 'idemctl person list shows the mappings';
    END IF;
    PERFORM idem.audit_write(session_user, 'person.remove', 'person:' || v_row.person,
        jsonb_build_object('person', v_row.person, 'login', p_login)::text);
    RETURN v_row;
END
$$;
