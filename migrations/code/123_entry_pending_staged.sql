-- object: function idem.entry_pending_staged(text[], text[])
-- grant: operator
-- entry_pending_staged is idem.entry_pending_check's and the dry run's
-- look into the stages of the import plans not yet run (planned, approved,
-- running; idem.import_plan_seal_stage): of the identities $1 tenant_id, $2
-- operation_id (parallel arrays), those such a plan's stage holds, which
-- its run enters without their effect; each position held comes back once
-- (1-based), with the first such plan, its kind and state. A staged plan
-- keeps its rows in its stage, not as idem.entry_item rows, so the probe of
-- the items misses them. The caller leaves out identities the inbox holds
-- (a running plan's committed chunks, or an identity entered otherwise).
-- Each stage is probed by the key the seal made on its rows' identities (a
-- plan sealed before that key existed is scanned). Off Citus only: there an
-- import plan keeps its items as rows.
CREATE OR REPLACE FUNCTION idem.entry_pending_staged(p_tenants text[], p_operations text[])
RETURNS TABLE (ord int4, id bigint, kind text, state text)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_p idem.entry_plan;
    v_t regclass;
BEGIN
    IF cardinality(p_tenants) IS DISTINCT FROM cardinality(p_operations) THEN
        RAISE EXCEPTION 'entry_pending_staged: % tenants for % operations', cardinality(p_tenants), cardinality(p_operations)
            USING ERRCODE = '22023';
    END IF;
    FOR v_p IN SELECT * FROM idem.entry_plan p
               WHERE p.staged AND p.state IN ('planned', 'approved', 'running') ORDER BY p.id LOOP
        v_t := to_regclass(format('idem.%I', 'import_stage_' || v_p.id));
        CONTINUE WHEN v_t IS NULL;
        RETURN QUERY EXECUTE format($q$
            SELECT k.ord::int4, $3, $4, $5
            FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS k(tenant_id, operation_id, ord)
            WHERE EXISTS (SELECT 1 FROM %s s
                          WHERE hashtextextended(s.tenant_id || E'\x01' || s.operation_id, 0)
                                = hashtextextended(k.tenant_id || E'\x01' || k.operation_id, 0)
                            AND s.tenant_id = k.tenant_id AND s.operation_id = k.operation_id)$q$, v_t)
            USING p_tenants, p_operations, v_p.id, v_p.kind, v_p.state;
    END LOOP;
END
$$;
