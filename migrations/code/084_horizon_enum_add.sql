-- object: function idem.horizon_enum_add(uuid, text, text[], text[], timestamptz[])
-- grant: operator
-- horizon_enum_add stores a batch of identities an enumerating probe listed
-- for probe run p_run (parallel arrays). Returns how many it stored.
CREATE OR REPLACE FUNCTION idem.horizon_enum_add(
    p_run uuid, p_source text, p_tenants text[], p_operations text[], p_ts timestamptz[]
) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_n bigint;
BEGIN
    IF p_run IS NULL OR p_source IS NULL
       OR cardinality(p_tenants) IS DISTINCT FROM cardinality(p_operations)
       OR cardinality(p_tenants) IS DISTINCT FROM cardinality(p_ts) THEN
        RAISE EXCEPTION 'enumerated identities: a run, a source and three arrays of one length' USING ERRCODE = '22023';
    END IF;
    INSERT INTO idem.horizon_enum (run_id, source, tenant_id, operation_id, ts)
    SELECT p_run, p_source, t, o, s FROM unnest(p_tenants, p_operations, p_ts) AS u(t, o, s);
    GET DIAGNOSTICS v_n = ROW_COUNT;
    RETURN v_n;
END
$$;
