-- object: function idem.rebuild_dispatch()
-- rebuild_dispatch regenerates idem.run_effect, a function that calls each
-- class's effect by name. Static calls let PostgreSQL cache their plans, which
-- a dynamic EXECUTE cannot. idem.register_class runs it, and so does every
-- installation of this code package. run_effect is the one generated function
-- of the schema: owned by the schema owner, executable by nobody else, an
-- internal helper that runs as its caller (idem.execute, the owner) with the
-- caller's pinned search_path. Before every call it checks the effect again
-- (IX016): the function it calls by name must still be the one registered
-- (p_effect, the OID idem.execute read from the class: a function dropped
-- and created again, or another in its place after its schema was renamed,
-- is not) and still pass the registration's checks, whatever was done to it
-- or its owner since. The check is a statement of its own that runs before
-- the call is planned: planning a call of the effect can run its owner's
-- code (an inlined SQL body, a DEFAULT argument) as the schema owner. The check is one plain statement in the dispatcher (one probe
-- of pg_proc, one of pg_authid through pg_roles, built-ins over the backend's
-- caches with the roles and schema as constants), which accepts exactly what
-- passes idem.effect_problem while the effect keeps the search_path it was
-- registered with; anything it does not accept is decided by
-- idem.effect_problem itself, which names the problem (and accepts an effect
-- whose pinned search_path has merely changed).
CREATE OR REPLACE FUNCTION idem.rebuild_dispatch()
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $rebuild$
DECLARE
    v_branches text := '';
    r record;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('idem.rebuild_dispatch'));
    FOR r IN
        SELECT c.name, CASE WHEN p.oid IS NOT NULL THEN format('%I.%I', n.nspname, p.proname) END AS fn, n.nspname, p.proname, p.oid::regprocedure::text AS sig,
               c.effect::oid::text AS oid,
               (SELECT array_agg(s ORDER BY s) FROM unnest(p.proconfig) s WHERE s LIKE 'search\_path=%') AS pinned
        FROM idem.op_class c
        LEFT JOIN pg_proc p ON p.oid = c.effect
        LEFT JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE c.effect IS NOT NULL
        ORDER BY c.name
    LOOP
        IF r.fn IS NULL THEN
            v_branches := v_branches || format(
                '    IF p_op_class = %L THEN RAISE EXCEPTION ''class %%: its effect (function %s) is no longer in the database'', p_op_class' ||
                ' USING ERRCODE = ''IX016'', HINT = ''nothing ran; register the class again''; END IF;' || chr(10),
                r.name, r.oid);
            CONTINUE;
        END IF;
        -- Names, not OIDs: the body is the same on every node of a cluster.
        -- The fast check is idem.effect_problem's conditions in one
        -- statement: the argument types are the signature's (the literal
        -- names them; a function dropped and created again under it may
        -- return another type, so the result is checked), and the pinned
        -- search_path is the one registered (an effect without one never
        -- passes here: NULL).
        v_branches := v_branches || format(
            '    IF p_op_class = %1$L THEN' || chr(10) ||
            '        SELECT true INTO v_ok FROM pg_catalog.pg_proc p' || chr(10) ||
            '        WHERE p.oid = p_effect AND p.oid = %2$L::pg_catalog.regprocedure AND p.pronamespace = %3$L::pg_catalog.regnamespace AND p.proname = %4$L' || chr(10) ||
            '          AND p.prorettype = ''pg_catalog.jsonb''::pg_catalog.regtype AND NOT p.proretset' || chr(10) ||
            '          AND p.prosecdef AND p.proconfig OPERATOR(pg_catalog.@>) %5$L::text[]' || chr(10) ||
            '          AND (SELECT NOT (r.rolsuper OR r.rolcreaterole OR r.rolbypassrls OR r.rolreplication) FROM pg_catalog.pg_roles r WHERE r.oid = p.proowner)' || chr(10) ||
            '          AND NOT (pg_catalog.pg_has_role(p.proowner, current_user, ''MEMBER'')' || chr(10) ||
            '                   OR pg_catalog.has_schema_privilege(p.proowner, ''idem''::pg_catalog.regnamespace, ''USAGE, CREATE'')' || chr(10) ||
            '                   OR pg_catalog.pg_has_role(p.proowner, ''pg_write_all_data''::pg_catalog.regrole, ''MEMBER'')' || chr(10) ||
            '                   OR pg_catalog.pg_has_role(p.proowner, ''pg_read_all_data''::pg_catalog.regrole, ''MEMBER'')' || chr(10) ||
            '                   OR pg_catalog.pg_has_role(p.proowner, ''pg_execute_server_program''::pg_catalog.regrole, ''MEMBER'')' || chr(10) ||
            '                   OR pg_catalog.pg_has_role(p.proowner, ''pg_write_server_files''::pg_catalog.regrole, ''MEMBER'')' || chr(10) ||
            '                   OR pg_catalog.pg_has_role(p.proowner, ''pg_read_server_files''::pg_catalog.regrole, ''MEMBER''))' || chr(10) ||
            '          AND pg_catalog.has_function_privilege(p.oid, ''EXECUTE'');' || chr(10) ||
            '        IF v_ok IS NULL THEN' || chr(10) ||
            '            v_problem := idem.effect_problem(p_effect, pg_catalog.to_regnamespace(%3$L), %4$L);' || chr(10) ||
            '            IF v_problem IS NULL AND pg_catalog.to_regprocedure(%2$L) IS DISTINCT FROM p_effect THEN' || chr(10) ||
            '                v_problem := ''was dropped and created again, or another function took its name, since it was registered: register the class again'';' || chr(10) ||
            '            END IF;' || chr(10) ||
            '            IF v_problem IS NOT NULL THEN' || chr(10) ||
            '                RAISE EXCEPTION ''class %%: effect %%: %%'', p_op_class, %2$L, v_problem USING ERRCODE = ''IX016'',' || chr(10) ||
            '                    HINT = ''nothing ran; the schema owner checks it with idemctl doctor and registers it again once it passes'';' || chr(10) ||
            '            END IF;' || chr(10) ||
            '        END IF;' || chr(10) ||
            '        RETURN %6$s(p_tenant_id, p_operation_id, p_payload);' || chr(10) ||
            '    END IF;' || chr(10),
            r.name, r.sig, quote_ident(r.nspname), r.proname, r.pinned, r.fn);
    END LOOP;
    -- (Before 2026-12: run_effect took no p_effect.)
    DROP FUNCTION IF EXISTS idem.run_effect(text, text, text, jsonb);
    EXECUTE format($fn$
CREATE OR REPLACE FUNCTION idem.run_effect(p_op_class text, p_tenant_id text, p_operation_id text, p_payload jsonb, p_effect oid)
RETURNS jsonb
LANGUAGE plpgsql
AS $body$
DECLARE
    v_ok      boolean;
    v_problem text;
BEGIN
%s    RAISE EXCEPTION 'class %% has no SQL effect', p_op_class USING ERRCODE = 'IX004';
END
$body$$fn$, v_branches);
    REVOKE ALL ON FUNCTION idem.run_effect(text, text, text, jsonb, oid) FROM PUBLIC;
END
$rebuild$;
