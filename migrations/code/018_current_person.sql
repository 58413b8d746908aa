-- object: function idem.current_person()
-- grant: operator, auditor
-- current_person is the person behind this session's login (session_user,
-- which SET ROLE and SECURITY DEFINER do not change), or NULL when the login
-- maps to no person or, through patterns, to more than one. An exact login
-- mapping wins over patterns.
CREATE OR REPLACE FUNCTION idem.current_person()
RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
    SELECT coalesce(
        (SELECT l.person FROM idem.person_login l WHERE l.login_pattern = session_user::text),
        (SELECT CASE WHEN count(DISTINCT l.person) = 1 THEN min(l.person) END
         FROM idem.person_login l
         WHERE strpos(l.login_pattern, '*') > 0
           AND session_user::text LIKE replace(replace(replace(replace(l.login_pattern,
                   '\', '\\'), '%', '\%'), '_', '\_'), '*', '%')))
$$;
