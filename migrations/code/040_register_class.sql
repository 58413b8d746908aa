-- object: function idem.register_class(text, regprocedure, text, text, regclass[])
-- register_class adds or updates an operation class; only the schema owner
-- may call it (a class decides what code idem.execute runs). An effect must
-- pass idem.effect_problem: (tenant_id text, operation_id text, payload
-- jsonb) RETURNS jsonb, SECURITY DEFINER with a pinned search_path, owned by
-- a role with no way to the owner's rights, executable by the owner. The
-- check is made again before every call (idem.run_effect). Re-registering
-- never changes a retention policy (idemctl class set does, deliberately).
-- Recorded in the audit log.
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
        v_bad := idem.effect_problem(p_effect);
        IF v_bad IS NOT NULL THEN
            RAISE EXCEPTION 'effect % %', p_effect, v_bad
                USING ERRCODE = 'IX008',
                      HINT = format('an effect is SECURITY DEFINER with SET search_path = pg_catalog, <its schema>, pg_temp, owned by a dedicated NOLOGIN role '
                                    'with rights on its own tables only (no CREATEROLE, BYPASSRLS, role of this schema or pg_* role), and the schema owner may execute it: '
                                    'GRANT EXECUTE ON FUNCTION %s TO %I (and USAGE on its schema)', p_effect, v_owner);
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
