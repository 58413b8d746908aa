-- object: function idem.require_person(text)
-- require_person returns the person behind this session's login, or raises
-- IX313 naming the login and the act (p_act) that needs a person.
CREATE OR REPLACE FUNCTION idem.require_person(p_act text)
RETURNS text
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_person text := idem.current_person();
BEGIN
    IF v_person IS NULL THEN
        RAISE EXCEPTION 'login % maps to no person: it cannot %', session_user, p_act
            USING ERRCODE = 'IX313',
                  HINT = 'the schema owner maps logins to persons: idemctl person add NAME --login LOGIN';
    END IF;
    RETURN v_person;
END
$$;
