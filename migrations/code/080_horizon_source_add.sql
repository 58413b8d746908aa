-- object: function idem.horizon_source_add(text, text, jsonb, interval, text)
-- grant: operator
-- horizon_source_add registers a replay source. Its config never holds a
-- secret (IX311; idem.horizon_source_problem says which forms are refused,
-- before anything is stored or audited): a source names where its
-- credentials are (an environment variable such as password_env, a libpq
-- service or passfile entry). Recorded in the audit log with its config.
CREATE OR REPLACE FUNCTION idem.horizon_source_add(
    p_name text, p_kind text, p_config jsonb, p_timeout interval, p_operator text
) RETURNS idem.horizon_source
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_row     idem.horizon_source;
    v_problem text;
BEGIN
    PERFORM idem.check_operator(p_operator, 'add source');
    IF p_name IS NULL OR p_name !~ '^[a-z0-9][a-z0-9_.-]*$' OR octet_length(p_name) > 64 OR p_name = 'manual' THEN
        RAISE EXCEPTION 'source name %: lower-case letters, digits, ".", "_" or "-", at most 64 bytes, not manual',
                coalesce(quote_literal(p_name), 'NULL') USING ERRCODE = 'IX308';
    END IF;
    IF p_kind IS NULL OR p_kind NOT IN ('postgres', 'archive', 'nats', 'kafka') THEN
        RAISE EXCEPTION 'source %: unknown kind %', p_name, coalesce(quote_literal(p_kind), 'NULL') USING ERRCODE = 'IX308';
    END IF;
    IF p_config IS NULL OR jsonb_typeof(p_config) <> 'object' OR p_timeout IS NULL OR p_timeout <= interval '0' THEN
        RAISE EXCEPTION 'source %: the config must be a JSON object and the timeout positive', p_name USING ERRCODE = 'IX308';
    END IF;
    v_problem := idem.horizon_source_problem(p_kind, p_config);
    IF v_problem IS NOT NULL THEN
        IF v_problem LIKE 'IX311%' THEN
            RAISE EXCEPTION 'source %: %', p_name, substr(v_problem, 7) USING ERRCODE = 'IX311',
                HINT = 'name an environment variable (--password-env) or use a libpq service or passfile entry';
        END IF;
        RAISE EXCEPTION 'source %: %', p_name, substr(v_problem, 7) USING ERRCODE = substr(v_problem, 1, 5);
    END IF;
    INSERT INTO idem.horizon_source (name, kind, config, timeout, created_by)
    VALUES (p_name, p_kind, p_config, p_timeout, p_operator)
    ON CONFLICT (name) DO NOTHING
    RETURNING * INTO v_row;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'source % already exists', p_name USING ERRCODE = 'IX308', HINT = 'remove it first';
    END IF;
    PERFORM idem.audit_write(p_operator, 'horizon.source.add', 'horizon_source:' || p_name, jsonb_build_object(
        'name', p_name, 'kind', p_kind, 'config', p_config, 'timeout_seconds', extract(epoch FROM p_timeout))::text);
    RETURN v_row;
END
$$;
