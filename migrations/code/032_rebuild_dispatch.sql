-- object: function idem.rebuild_dispatch()
-- rebuild_dispatch regenerates idem.run_effect, a function that calls each
-- class's effect by name. Static calls let PostgreSQL cache their plans, which
-- a dynamic EXECUTE cannot. idem.register_class runs it, and so does every
-- installation of this code package. run_effect is the one generated function
-- of the schema: owned by the schema owner, executable by nobody else, an
-- internal helper that runs as its caller (idem.execute, the owner) with the
-- caller's pinned search_path.
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
        SELECT c.name, format('%I.%I', n.nspname, p.proname) AS fn
        FROM idem.op_class c
        JOIN pg_proc p ON p.oid = c.effect
        JOIN pg_namespace n ON n.oid = p.pronamespace
        ORDER BY c.name
    LOOP
        v_branches := v_branches || format(
            '    IF p_op_class = %L THEN RETURN %s(p_tenant_id, p_operation_id, p_payload); END IF;' || chr(10),
            r.name, r.fn);
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
