-- object: function idem.import_approve_check(bigint)
-- import_approve_check raises unless the rows the approver of import plan
-- p_id read again from its source (pg_temp.idem_import_check, made for
-- this plan by idem.import_check_open in this transaction: any other
-- table, or one opened for another plan, IX341) are exactly what the plan
-- will enter:
--   - a staged plan (idem.import_plan_seal_stage): their digest
--     (idem.import_stage_digest, the seal's own computation) and count are
--     the plan's; else IX343 naming the first row, by its place n, that
--     differs from the stage (or that one of the two lacks);
--   - a plan that keeps an item a row (on Citus): every planned item read
--     again once with its planned fingerprint (idem.import_fingerprint),
--     none more; else IX343 naming the first that differs;
--   - a plan that keeps only its planner's digest of its items
--     (idem.import_plan_seal_digest) cannot be checked row by row: IX343,
--     plan it again.
-- The approver's own idemctl reads the source, so a planner who staged
-- rows the source does not hold (with psql) has them refused here, by the
-- second person, before anything can run. Internal: granted to nobody.
CREATE OR REPLACE FUNCTION idem.import_approve_check(p_id bigint)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
SET TimeZone = 'UTC'
AS $$
DECLARE
    v_p    idem.entry_plan;
    v_t    text := format('idem.%I', 'import_stage_' || p_id);
    v_c    record;
    v_bad  record;
    v_hint text := 'idemctl import approve ' || p_id || ' --from-ndjson FILE (or --from-postgres DSN --query SQL) reads the plan''s source again';
BEGIN
    SELECT * INTO STRICT v_p FROM idem.entry_plan WHERE id = p_id;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_class c
                   WHERE c.oid = pg_catalog.to_regclass('pg_temp.idem_import_check') AND c.relkind = 'r'
                     AND c.relowner = (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = current_user)
                     AND NOT c.relrowsecurity AND NOT c.relhastriggers AND NOT c.relhasrules)
       OR pg_catalog.obj_description(pg_catalog.to_regclass('pg_temp.idem_import_check'), 'pg_class')
          IS DISTINCT FROM 'check of import plan ' || p_id THEN
        RAISE EXCEPTION 'import plan %: its approver reads its source again first (idem.import_check_open(%), then the rows): nothing approved',
            p_id, p_id USING ERRCODE = 'IX341', HINT = v_hint;
    END IF;
    IF v_p.staged THEN
        IF to_regclass(v_t) IS NULL THEN
            RAISE EXCEPTION 'import plan %: its stage is gone (an unlogged stage is emptied when the database restarts after a crash): nothing approved',
                p_id USING ERRCODE = 'IX343', HINT = 'plan the import again';
        END IF;
        SELECT * INTO v_c FROM idem.import_stage_digest('pg_temp.idem_import_check'::regclass);
        IF v_c.staged = v_p.items AND v_c.digest = v_p.items_digest AND v_c.first_n = 1 AND v_c.last_n = v_p.items THEN
            RETURN;
        END IF;
        EXECUTE format($q$
            SELECT coalesce(c.n, s.n) AS n, coalesce(c.tenant_id, s.tenant_id) AS tenant_id,
                   coalesce(c.operation_id, s.operation_id) AS operation_id,
                   CASE WHEN s.n IS NULL THEN 'is in the source, not in the plan'
                        WHEN c.n IS NULL THEN 'is in the plan, not in the source'
                        ELSE 'differs from the source''s' END AS why
            FROM %s s FULL JOIN pg_temp.idem_import_check c ON c.n = s.n
            WHERE s.n IS NULL OR c.n IS NULL
               OR (s.tenant_id, s.operation_id, s.payload_hash, s.store_hash, s.response, s.created_at, s.evidence)
                  IS DISTINCT FROM (c.tenant_id, c.operation_id, c.payload_hash, c.store_hash, c.response::jsonb,
                                    c.created_at, c.evidence)
            ORDER BY 1 LIMIT 1$q$, v_t) INTO v_bad;
        IF v_bad.n IS NULL THEN
            RAISE EXCEPTION 'import plan %: the rows read again from the source do not have the plan''s digest: nothing approved', p_id
                USING ERRCODE = 'IX343', HINT = 'abort the plan (idemctl import abort) and plan it again';
        END IF;
        RAISE EXCEPTION 'import plan %: its row % (%, %) % (% rows read again, % planned): nothing approved',
            p_id, v_bad.n, v_bad.tenant_id, v_bad.operation_id, v_bad.why, v_c.staged, v_p.items
            USING ERRCODE = 'IX343',
                  HINT = 'the plan is not what its source gives: abort it (idemctl import abort) and plan it again';
    ELSIF v_p.items_digest IS NOT NULL THEN
        RAISE EXCEPTION 'import plan % keeps only its planner''s digest of its items, which cannot be checked against the source: nothing approved',
            p_id USING ERRCODE = 'IX343', HINT = 'abort it (idemctl import abort) and plan it again with idemctl import plan';
    END IF;
    SELECT count(*) AS staged, count(DISTINCT (c.tenant_id, c.operation_id)) AS distinct_ids,
           count(*) FILTER (WHERE e.fingerprint = idem.import_fingerprint(
               c.tenant_id, c.operation_id, c.payload_hash, c.store_hash, c.response, c.created_at)) AS matched
    INTO v_c
    FROM pg_temp.idem_import_check c
    LEFT JOIN idem.entry_item e ON e.plan_id = p_id AND e.tenant_id = c.tenant_id AND e.operation_id = c.operation_id;
    IF v_c.staged = v_p.items AND v_c.matched = v_p.items AND v_c.distinct_ids = v_p.items THEN
        RETURN;
    END IF;
    SELECT c.n, c.tenant_id, c.operation_id,
           CASE WHEN e.seq IS NULL THEN 'is in the source, not in the plan'
                WHEN e.fingerprint IS DISTINCT FROM idem.import_fingerprint(
                         c.tenant_id, c.operation_id, c.payload_hash, c.store_hash, c.response, c.created_at)
                    THEN 'differs from the source''s'
                ELSE 'is read twice from the source' END AS why
    INTO v_bad
    FROM pg_temp.idem_import_check c
    LEFT JOIN idem.entry_item e ON e.plan_id = p_id AND e.tenant_id = c.tenant_id AND e.operation_id = c.operation_id
    WHERE e.seq IS NULL
       OR e.fingerprint IS DISTINCT FROM idem.import_fingerprint(c.tenant_id, c.operation_id, c.payload_hash, c.store_hash,
                                                                 c.response, c.created_at)
       OR EXISTS (SELECT 1 FROM pg_temp.idem_import_check d
                  WHERE d.tenant_id = c.tenant_id AND d.operation_id = c.operation_id AND d.n < c.n)
    ORDER BY c.n LIMIT 1;
    IF NOT FOUND THEN
        SELECT e.seq AS n, e.tenant_id, e.operation_id, 'is in the plan, not in the source' AS why
        INTO v_bad
        FROM idem.entry_item e
        WHERE e.plan_id = p_id
          AND NOT EXISTS (SELECT 1 FROM pg_temp.idem_import_check c
                          WHERE c.tenant_id = e.tenant_id AND c.operation_id = e.operation_id)
        ORDER BY e.seq LIMIT 1;
    END IF;
    RAISE EXCEPTION 'import plan %: its item % (%, %) % (% rows read again, % planned): nothing approved',
        p_id, v_bad.n, v_bad.tenant_id, v_bad.operation_id, v_bad.why, v_c.staged, v_p.items
        USING ERRCODE = 'IX343',
              HINT = 'the plan is not what its source gives: abort it (idemctl import abort) and plan it again';
END
$$;
