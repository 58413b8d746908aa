-- object: function idem.register_class(text, regprocedure, text, text, regclass[])
-- register_class adds or updates an operation class; only the schema owner
-- may call it (a class decides what code idem.execute runs). An effect must be
-- (tenant_id text, operation_id text, payload jsonb) RETURNS jsonb, and must
-- not inherit the owner's rights: it runs from inside idem.execute, so it must
-- itself be SECURITY DEFINER with a pinned search_path, owned by a role that
-- is neither the schema owner (nor a member of it) nor a superuser and holds
-- no privilege on schema idem, and the schema owner must be allowed to
-- execute it. Re-registering never changes a retention policy (idemctl class
-- set does, deliberately). Recorded in the audit log.
-- p_tables declares the tables the effect writes or reads (PostgreSQL records
-- no dependencies of a function body). On a Citus coordinator whose schema is
-- distributed, idem.execute runs the effect on the node holding the tenant's
-- shard, so there an effect must declare its tables, each distributed by
-- tenant_id co-located with idem.identity or a reference table, and the
-- effect must exist on every node (a distributed function); anything else is
-- refused (IX008). Delegation is forced, so an effect that strays from its
-- tables fails at run time instead of running across nodes.
CREATE OR REPLACE FUNCTION idem.register_class(
    p_name text, p_effect regprocedure, p_retention text DEFAULT 'forever', p_description text DEFAULT NULL,
    p_tables regclass[] DEFAULT NULL
) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_fn    record;
    v_owner text := current_user;
    v_old   idem.op_class;
    v_bad   text;
BEGIN
    IF p_tables IS NOT NULL AND (cardinality(p_tables) > 64 OR array_position(p_tables, NULL) IS NOT NULL) THEN
        RAISE EXCEPTION 'class %: declare at most 64 tables, none NULL', p_name USING ERRCODE = 'IX008';
    END IF;
    IF p_effect IS NOT NULL AND idem.citus_distributed() THEN
        IF p_tables IS NULL THEN
            RAISE EXCEPTION 'class %: on Citus an effect declares the tables it touches', p_name
                USING ERRCODE = 'IX008',
                      HINT = 'pass p_tables => ARRAY[''schema.table'']::regclass[] (ARRAY[]::regclass[] for none), each co-located with idem.identity or a reference table';
        END IF;
        v_bad := idem.citus_not_colocated(p_tables);
        IF v_bad IS NOT NULL THEN
            RAISE EXCEPTION 'class %: table % is neither distributed by tenant_id co-located with idem.identity nor a reference table', p_name, v_bad
                USING ERRCODE = 'IX008',
                      HINT = 'SELECT create_distributed_table(''' || v_bad || ''', ''tenant_id'', colocate_with => ''idem.identity'') as its owner';
        END IF;
        IF NOT idem.citus_on_every_node(p_effect) THEN
            RAISE EXCEPTION 'class %: effect % is not on every node of the cluster', p_name, p_effect
                USING ERRCODE = 'IX008',
                      HINT = format('SELECT create_distributed_function(%L) as its owner', p_effect::text);
        END IF;
    END IF;
    IF p_effect IS NOT NULL THEN
        SELECT p.pronargs = 3 AND p.proargtypes[0] = 'text'::regtype AND p.proargtypes[1] = 'text'::regtype
                   AND p.proargtypes[2] = 'jsonb'::regtype AND p.prorettype = 'jsonb'::regtype AND NOT p.proretset AS shape,
               p.prosecdef AS definer,
               EXISTS (SELECT 1 FROM unnest(p.proconfig) c WHERE c LIKE 'search_path=%') AS pinned,
               r.rolname AS owner, r.rolsuper AS super,
               pg_has_role(p.proowner, v_owner, 'MEMBER') AS owner_member,
               has_schema_privilege(p.proowner, 'idem', 'USAGE') OR has_schema_privilege(p.proowner, 'idem', 'CREATE') AS idem_rights,
               has_function_privilege(v_owner, p.oid, 'EXECUTE') AS callable
        INTO v_fn
        FROM pg_proc p JOIN pg_roles r ON r.oid = p.proowner
        WHERE p.oid = p_effect;
        IF NOT v_fn.shape THEN
            RAISE EXCEPTION 'effect % must be (tenant_id text, operation_id text, payload jsonb) RETURNS jsonb', p_effect
                USING ERRCODE = 'IX008';
        ELSIF NOT v_fn.definer OR NOT v_fn.pinned THEN
            RAISE EXCEPTION 'effect % must be SECURITY DEFINER with SET search_path: it runs from inside idem.execute and must not inherit the schema owner''s rights', p_effect
                USING ERRCODE = 'IX008', HINT = 'ALTER FUNCTION ... SECURITY DEFINER SET search_path = pg_catalog, <its schema>, pg_temp';
        ELSIF v_fn.super OR v_fn.owner_member OR v_fn.idem_rights THEN
            RAISE EXCEPTION 'effect % is owned by %, which is a superuser, the schema owner, or holds rights on schema idem', p_effect, v_fn.owner
                USING ERRCODE = 'IX008',
                      HINT = 'own effects by a dedicated NOLOGIN role with rights on its own tables only (the README shows how)';
        ELSIF NOT v_fn.callable THEN
            RAISE EXCEPTION 'the schema owner % may not execute effect %', v_owner, p_effect
                USING ERRCODE = 'IX008', HINT = format('GRANT EXECUTE ON FUNCTION %s TO %I (and USAGE on its schema)', p_effect, v_owner);
        END IF;
    END IF;
    SELECT * INTO v_old FROM idem.op_class c WHERE c.name = p_name FOR UPDATE;
    IF FOUND AND v_old.retention <> coalesce(p_retention, 'forever') THEN
        RAISE EXCEPTION 'class % is registered with retention %, not %', p_name, v_old.retention, coalesce(p_retention, 'forever')
            USING ERRCODE = 'IX008', HINT = 'change a retention policy deliberately: idemctl class set';
    END IF;
    INSERT INTO idem.op_class (name, effect, retention, description, tables)
    VALUES (p_name, p_effect, coalesce(p_retention, 'forever'), p_description, idem.qualified_names(p_tables))
    ON CONFLICT (name) DO UPDATE SET effect = EXCLUDED.effect, description = EXCLUDED.description, tables = EXCLUDED.tables;
    PERFORM idem.rebuild_dispatch();
    PERFORM idem.audit_write(session_user, 'class.register', 'class:' || p_name, jsonb_build_object(
        'class', p_name, 'effect', p_effect::text, 'retention', coalesce(p_retention, 'forever'),
        'description', p_description, 'tables', idem.qualified_names(p_tables), 'before', CASE WHEN v_old.name IS NULL THEN NULL
                                                     ELSE jsonb_build_object('effect', v_old.effect::text, 'tables', v_old.tables) END)::text);
END
$$;
