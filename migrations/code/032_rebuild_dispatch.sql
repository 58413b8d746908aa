-- object: function idem.rebuild_dispatch()
-- rebuild_dispatch regenerates idem.run_effect, a function that calls each
-- class's effect by name. Static calls let PostgreSQL cache their plans, which
-- a dynamic EXECUTE cannot. idem.register_class runs it, and so does every
-- installation of this code package. run_effect is the one generated function
-- of the schema: owned by the schema owner, executable by nobody else, an
-- internal helper that runs as its caller (idem.execute, the owner) with the
-- caller's pinned search_path. Before every call it checks the effect again
-- (IX016): the function it calls by name must still pass the registration's
-- checks, whatever was done to it or its owner since. The check is split by
-- what can invalidate it. What pg_proc says (the function's shape, SECURITY
-- DEFINER, pinned search_path, owner, rights) is decided by
-- idem.effect_owner_at_plan, folded into the plan of the one expression that
-- also calls the effect, and PostgreSQL plans it again whenever the
-- effect's pg_proc row changes or the function is dropped: no catalogue
-- read a call. What no plan follows, the owner's memberships and attributes
-- (GRANT, ALTER ROLE), is read at every call: built-ins over the backend's
-- caches for the memberships, idem.role_is_plain for the attributes.
-- Whatever the expression does not accept goes to idem.effect_recheck,
-- which decides with idem.effect_problem and names the problem.
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
               c.effect::oid::text AS oid
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
        -- %2$s is the owner as of the plan (the folded constant); both
        -- branches call the effect, so that the plan follows its pg_proc
        -- row whichever branch the folding leaves.
        v_branches := v_branches || format(
            '    IF p_op_class = %1$L THEN' || chr(10) ||
            '        RETURN CASE' || chr(10) ||
            '            WHEN NOT (pg_catalog.pg_has_role(%2$s, current_user, ''MEMBER'')' || chr(10) ||
            '                      OR pg_catalog.has_schema_privilege(%2$s, ''idem''::pg_catalog.regnamespace, ''USAGE, CREATE'')' || chr(10) ||
            '                      OR pg_catalog.pg_has_role(%2$s, ''pg_write_all_data''::pg_catalog.regrole, ''MEMBER'')' || chr(10) ||
            '                      OR pg_catalog.pg_has_role(%2$s, ''pg_read_all_data''::pg_catalog.regrole, ''MEMBER'')' || chr(10) ||
            '                      OR pg_catalog.pg_has_role(%2$s, ''pg_execute_server_program''::pg_catalog.regrole, ''MEMBER'')' || chr(10) ||
            '                      OR pg_catalog.pg_has_role(%2$s, ''pg_write_server_files''::pg_catalog.regrole, ''MEMBER'')' || chr(10) ||
            '                      OR pg_catalog.pg_has_role(%2$s, ''pg_read_server_files''::pg_catalog.regrole, ''MEMBER''))' || chr(10) ||
            '                 AND idem.role_is_plain(%2$s)' || chr(10) ||
            '            THEN %3$s(p_tenant_id, p_operation_id, p_payload)' || chr(10) ||
            '            WHEN idem.effect_recheck(p_op_class, %4$L, %5$L, %6$L)' || chr(10) ||
            '            THEN %3$s(p_tenant_id, p_operation_id, p_payload)' || chr(10) ||
            '        END;' || chr(10) ||
            '    END IF;' || chr(10),
            r.name,
            format('idem.effect_owner_at_plan(%L, %L, %L)', r.sig, quote_ident(r.nspname), r.proname),
            r.fn, r.sig, quote_ident(r.nspname), r.proname);
    END LOOP;
    EXECUTE format($fn$
CREATE OR REPLACE FUNCTION idem.run_effect(p_op_class text, p_tenant_id text, p_operation_id text, p_payload jsonb)
RETURNS jsonb
LANGUAGE plpgsql
AS $body$
BEGIN
%s    RAISE EXCEPTION 'class %% has no SQL effect', p_op_class USING ERRCODE = 'IX004';
END
$body$$fn$, v_branches);
    REVOKE ALL ON FUNCTION idem.run_effect(text, text, text, jsonb) FROM PUBLIC;
END
$rebuild$;
