-- object: function idem.role_is_plain(oid)
-- role_is_plain says whether a role is neither a superuser nor has
-- CREATEROLE, BYPASSRLS or REPLICATION (NULL when it does not exist): the
-- part of the per-call effect check that needs a read of pg_authid (through
-- pg_roles), since no built-in function tells these attributes and no plan
-- follows ALTER ROLE. STABLE, so it runs in its caller's snapshot.
CREATE OR REPLACE FUNCTION idem.role_is_plain(p_role oid)
RETURNS boolean
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_plain boolean;
BEGIN
    SELECT NOT (r.rolsuper OR r.rolcreaterole OR r.rolbypassrls OR r.rolreplication) INTO v_plain
    FROM pg_catalog.pg_roles r WHERE r.oid = p_role;
    RETURN v_plain;
END
$$;
