-- object: function idem.effect_problem(oid, oid, name)
-- effect_problem says why the function p_effect may not run from inside
-- idem.execute, or returns NULL when it may. idem.register_class refuses an
-- effect it names, idem.run_effect refuses to call one on every call (an
-- effect can change after its registration: CREATE OR REPLACE, ALTER
-- FUNCTION, DROP and CREATE, ALTER ROLE or GRANT to its owner), and
-- idem.effect_drift lists the registered ones it names. p_nsp and p_name,
-- when given, are the schema and name the caller calls the effect by: a
-- function renamed, moved or replaced by another since then is refused.
-- Runs as its caller, which must be the schema owner (current_user): the
-- effect must not inherit the owner's rights, so it must be SECURITY DEFINER
-- with a pinned search_path, owned by a role that is neither a superuser nor
-- able to become one or the owner (CREATEROLE, BYPASSRLS, REPLICATION,
-- membership in the owner, rights on schema idem held or inherited from a
-- role, or membership in a predefined role that reaches every table or the
-- server's files and programs), and the owner must be allowed to execute
-- it. (A NOINHERIT member of an idem role holds none of its rights until it
-- SETs ROLE, which a SECURITY DEFINER function may not do: accepted.)
CREATE OR REPLACE FUNCTION idem.effect_problem(p_effect oid, p_nsp oid DEFAULT NULL, p_name name DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_fn     record;
    v_found  boolean;
    v_pinned boolean := false;
    v_set    text;
BEGIN
    -- One read of pg_proc and pg_authid (through pg_roles) per call; the
    -- rest are built-in functions over the backend's caches.
    SELECT p.pronamespace AS nsp, p.proname AS name,
           p.pronargs = 3 AND p.proargtypes[0] = 'pg_catalog.text'::pg_catalog.regtype
               AND p.proargtypes[1] = 'pg_catalog.text'::pg_catalog.regtype
               AND p.proargtypes[2] = 'pg_catalog.jsonb'::pg_catalog.regtype
               AND p.prorettype = 'pg_catalog.jsonb'::pg_catalog.regtype AND NOT p.proretset AS shape,
           p.prosecdef AS definer, p.proconfig AS config,
           r.rolname AS owner,
           r.rolsuper OR r.rolcreaterole OR r.rolbypassrls OR r.rolreplication AS powerful,
           pg_catalog.pg_has_role(p.proowner, current_user, 'MEMBER')
               OR pg_catalog.has_schema_privilege(p.proowner, 'idem', 'USAGE')
               OR pg_catalog.has_schema_privilege(p.proowner, 'idem', 'CREATE') AS idem_rights,
           pg_catalog.pg_has_role(p.proowner, 'pg_write_all_data', 'MEMBER')
               OR pg_catalog.pg_has_role(p.proowner, 'pg_read_all_data', 'MEMBER')
               OR pg_catalog.pg_has_role(p.proowner, 'pg_execute_server_program', 'MEMBER')
               OR pg_catalog.pg_has_role(p.proowner, 'pg_write_server_files', 'MEMBER')
               OR pg_catalog.pg_has_role(p.proowner, 'pg_read_server_files', 'MEMBER') AS predefined,
           pg_catalog.has_function_privilege(current_user, p.oid, 'EXECUTE') AS callable
    INTO v_fn
    FROM pg_catalog.pg_proc p, pg_catalog.pg_roles r
    WHERE p.oid = p_effect AND r.oid = p.proowner;
    v_found := FOUND;
    IF v_found AND v_fn.definer AND v_fn.config IS NOT NULL THEN
        FOREACH v_set IN ARRAY v_fn.config LOOP
            v_pinned := v_pinned OR v_set LIKE 'search\_path=%';
        END LOOP;
    END IF;
    IF NOT v_found THEN
        RETURN 'is no longer in the database (dropped, or dropped and created again): register the class again';
    ELSIF (p_nsp IS NOT NULL AND v_fn.nsp <> p_nsp) OR (p_name IS NOT NULL AND v_fn.name <> p_name) THEN
        RETURN 'was renamed or moved to another schema since it was registered: register the class again';
    ELSIF NOT v_fn.shape THEN
        RETURN 'must be (tenant_id text, operation_id text, payload jsonb) RETURNS jsonb';
    ELSIF NOT v_pinned THEN
        RETURN 'must be SECURITY DEFINER with SET search_path: it runs from inside idem.execute and must not inherit the schema owner''s rights';
    ELSIF v_fn.powerful THEN
        RETURN pg_catalog.format('is owned by %s, a superuser or a role with CREATEROLE, BYPASSRLS or REPLICATION', v_fn.owner);
    ELSIF v_fn.idem_rights THEN
        RETURN pg_catalog.format('is owned by %s, which is the schema owner, a member of it, or holds rights on this schema (one of its roles)', v_fn.owner);
    ELSIF v_fn.predefined THEN
        RETURN pg_catalog.format('is owned by %s, a member of pg_write_all_data, pg_read_all_data, pg_execute_server_program, pg_write_server_files or pg_read_server_files', v_fn.owner);
    ELSIF NOT v_fn.callable THEN
        RETURN pg_catalog.format('may not be executed by the schema owner %s', current_user);
    END IF;
    RETURN NULL;
END
$$;
