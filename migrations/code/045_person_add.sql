-- object: function idem.person_add(text, text)
-- person_add maps a login (or a glob pattern of logins, * for any run of
-- characters) to a person, creating the person if needed; only the schema
-- owner may call it. A login already mapped is refused (IX401): remove it first.
CREATE OR REPLACE FUNCTION idem.person_add(p_person text, p_login text)
RETURNS idem.person_login
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_problem text := coalesce(idem.text_problem('a person name', p_person, 128), idem.text_problem('a login', p_login, 128));
    v_row     idem.person_login;
BEGIN
    IF v_problem IS NULL AND (btrim(p_person) <> p_person OR p_login = '*') THEN
        v_problem := 'a person name has no surrounding spaces, and a pattern must name more than "*"';
    END IF;
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'person %: %', coalesce(quote_literal(p_person), 'NULL'), v_problem USING ERRCODE = 'IX401';
    END IF;
    INSERT INTO idem.person (name, created_by) VALUES (p_person, session_user) ON CONFLICT DO NOTHING;
    INSERT INTO idem.person_login (login_pattern, person, created_by) VALUES (p_login, p_person, session_user)
    ON CONFLICT DO NOTHING
    RETURNING * INTO v_row;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'login % is already mapped to %', quote_literal(p_login),
                (SELECT person FROM idem.person_login WHERE login_pattern = p_login)
            USING ERRCODE = 'IX401', HINT = 'idemctl person remove --login first';
    END IF;
    PERFORM idem.audit_write(session_user, 'person.add', 'person:' || p_person,
        jsonb_build_object('person', p_person, 'login', p_login)::text);
    RETURN v_row;
END
$$;
