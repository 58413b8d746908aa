-- object: function idem.import_plan_seal_stage(bigint, text, jsonb, text, text, integer)
-- grant: operator
-- import_plan_seal_stage closes a staging import plan whose planner copied
-- its rows into its stage (idem.import_plan_stage_open), by its planner
-- only (IX343). It first takes back every grant on the stage and locks it
-- (a copy still running finishes first; none can start after), then, from
-- the staged rows alone, in one pass:
--   - every row passes idem.import_stage_problem (identity rules, created_at
--     known and past, a response, the payload's JSON, size, depth and
--     jcs-sha256 hash of exactly its bytes, or the store's hash alone, the
--     evidence), else IX343 naming the first bad row and nothing is sealed;
--   - the rows are numbered 1..count without a gap (n);
--   - the items digest (idem.import_stage_digest: sha256 over runs of 4096
--     rows in the order n; the payload is covered by its checked hash);
--   - a key on each row's identity (idem.entry_pending_staged probes it);
--   - the counts: items, tenants, hash-only items, oldest and newest
--     created_at, the identities the rows hold more than once
--     (identities_twice: such a plan is sealed for the record and its run
--     refused), the rows a chunk of the run enters in one transaction
--     (chunk_rows: p_chunk_rows, 1 to 1000000), for a money class what the
--     rows add up to per currency (money: idem.import_stage_money); the
--     sample: the first five rows.
-- The plan becomes 'planned' with the source's digest and counts
-- (p_source_counts, as idemctl read them) and the cursor: another person
-- approves exactly the staged rows, which nobody but the schema owner can
-- change, once the rows they read again from the source have the same
-- digest (idem.import_plan_approve). A class that needs what the plan does
-- not cite is refused (idem.entry_plan_class_check, IX343). Audited
-- (entry.plan). Returns the plan.
CREATE OR REPLACE FUNCTION idem.import_plan_seal_stage(
    p_id bigint, p_source_digest text, p_source_counts jsonb, p_cursor text, p_class text, p_chunk_rows integer
) RETURNS idem.entry_plan
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
SET jit = off
SET TimeZone = 'UTC'
SET DateStyle = 'ISO, YMD'
SET IntervalStyle = 'postgres'
SET extra_float_digits = 1
AS $$
DECLARE
    v_person text := idem.require_person('seal an import plan');
    v_p      idem.entry_plan := idem.import_plan_for_planner(p_id, v_person, 'sealed');
    v_t      text := format('idem.%I', 'import_stage_' || p_id);
    v_c      record;
    v_bad    record;
    v_nbad   bigint;
    v_n      bigint;
    v_twice  bigint;
    v_tenants bigint;
    v_sample jsonb;
    v_counts jsonb;
    v_money  jsonb;
BEGIN
    IF to_regclass(v_t) IS NULL OR EXISTS (SELECT 1 FROM idem.entry_item e WHERE e.plan_id = p_id) THEN
        RAISE EXCEPTION 'import plan % has no stage (idem.import_plan_stage_open), or holds item rows', p_id USING ERRCODE = 'IX343';
    END IF;
    PERFORM idem.import_seal_check(p_source_digest, p_source_counts);
    IF p_chunk_rows IS NULL OR p_chunk_rows NOT BETWEEN 1 AND 1000000 THEN
        RAISE EXCEPTION 'import plan: a chunk of the run is 1 to 1000000 rows' USING ERRCODE = 'IX343';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM idem.op_class k WHERE k.name = p_class) THEN
        RAISE EXCEPTION 'import plan: unknown operation class %', quote_nullable(p_class) USING ERRCODE = 'IX343';
    END IF;
    -- Nobody writes the stage from here on: every grant taken back (the
    -- planner's, and any other), then a lock that waits for a copy still
    -- running and keeps any other out until the seal commits.
    EXECUTE (SELECT format('REVOKE ALL ON %s FROM PUBLIC', v_t)
                    || coalesce(', ' || string_agg(DISTINCT quote_ident(r.rolname), ', '), '')
             FROM pg_class c CROSS JOIN LATERAL aclexplode(c.relacl) a JOIN pg_roles r ON r.oid = a.grantee
             WHERE c.oid = v_t::regclass AND a.grantee <> c.relowner);
    EXECUTE format('LOCK TABLE %s IN EXCLUSIVE MODE', v_t);
    IF EXISTS (SELECT 1 FROM pg_class c, aclexplode(c.relacl) a WHERE c.oid = v_t::regclass AND a.grantee <> c.relowner)
       OR NOT EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = v_t::regclass AND c.relkind = 'r'
                      AND c.relowner = (SELECT r.oid FROM pg_roles r WHERE r.rolname = current_user)
                      AND NOT c.relrowsecurity AND NOT c.relhastriggers AND NOT c.relhasrules) THEN
        RAISE EXCEPTION 'import plan %: its stage is not the schema owner''s closed table', p_id USING ERRCODE = 'IX343';
    END IF;
    EXECUTE format('SELECT count(*) FROM %s', v_t) INTO v_n;
    -- Every row's problem: one scan, in parallel workers when there are
    -- (the costly part: JSON, hash, identity rules).
    EXECUTE format($q$
        SELECT count(*) FROM %s s
        WHERE idem.import_stage_problem(s.tenant_id, s.operation_id, s.payload, s.payload_hash, s.response, s.created_at,
                                        s.store_hash, s.evidence) IS NOT NULL$q$, v_t) INTO v_nbad;
    -- Then the digest and counts (idem.import_stage_digest: the one
    -- computation of it, which the approval makes again over the rows its
    -- approver read from the source).
    SELECT * INTO v_c FROM idem.import_stage_digest(v_t::regclass);
    IF v_nbad > 0 THEN
        EXECUTE format($q$
            SELECT s.n, s.tenant_id, s.operation_id,
                   idem.import_stage_problem(s.tenant_id, s.operation_id, s.payload, s.payload_hash, s.response, s.created_at,
                                             s.store_hash, s.evidence) AS problem
            FROM %s s
            WHERE idem.import_stage_problem(s.tenant_id, s.operation_id, s.payload, s.payload_hash, s.response, s.created_at,
                                            s.store_hash, s.evidence) IS NOT NULL
            ORDER BY s.n LIMIT 1$q$, v_t) INTO v_bad;
        RAISE EXCEPTION 'import plan %: staged row % (%, %): %: nothing sealed', p_id, v_bad.n, v_bad.tenant_id, v_bad.operation_id,
            v_bad.problem USING ERRCODE = 'IX343';
    END IF;
    IF v_n = 0 THEN
        RAISE EXCEPTION 'import plan %: nothing to import', p_id USING ERRCODE = 'IX343';
    END IF;
    IF v_c.staged <> v_n OR v_c.first_n <> 1 OR v_c.last_n <> v_n OR v_n > 2147483647 THEN
        RAISE EXCEPTION 'import plan %: its % staged rows are not numbered 1 to %: nothing sealed', p_id, v_n, v_n
            USING ERRCODE = 'IX343';
    END IF;
    -- Identities staged more than once: a 64-bit hash of each (no control
    -- character separates tenant and operation in a valid row), then the
    -- rows of the hashes seen twice compared whole.
    EXECUTE format($q$
        SELECT count(*) FROM (
            SELECT s.tenant_id, s.operation_id FROM %1$s s
            WHERE hashtextextended(s.tenant_id || E'\x01' || s.operation_id, 0) IN (
                SELECT hashtextextended(d.tenant_id || E'\x01' || d.operation_id, 0) FROM %1$s d GROUP BY 1 HAVING count(*) > 1)
            GROUP BY 1, 2 HAVING count(*) > 1) t$q$, v_t) INTO v_twice;
    EXECUTE format('SELECT count(*) FROM (SELECT s.tenant_id FROM %s s GROUP BY 1) t', v_t) INTO v_tenants;
    -- A key on each row's identity (its 64-bit hash, as above), so that
    -- resolve finds at once whether a plan not yet run holds an identity
    -- (idem.entry_pending_staged) however many rows the stage has.
    EXECUTE format($q$CREATE INDEX ON %s ((hashtextextended(tenant_id || E'\x01' || operation_id, 0)))$q$, v_t);
    EXECUTE format($q$
        SELECT jsonb_agg(jsonb_build_object('tenant_id', s.tenant_id, 'operation_id', s.operation_id, 'class', $1,
                                            'created_at', s.created_at, 'evidence', s.evidence) ORDER BY s.n)
        FROM %s s WHERE s.n <= 5$q$, v_t) INTO v_sample USING p_class;
    v_counts := jsonb_build_object('items', v_n, 'tenants', v_tenants, 'hash_only', v_c.hash_only,
                                   'oldest', v_c.oldest, 'newest', v_c.newest, 'classes', jsonb_build_object(p_class, v_n),
                                   'identities_twice', v_twice, 'chunk_rows', p_chunk_rows,
                                   'source', coalesce(p_source_counts, '{}'::jsonb));
    -- A money class: what the rows add up to per currency, for the approver.
    SELECT k.money INTO v_money FROM idem.op_class k WHERE k.name = p_class;
    IF v_money IS NOT NULL THEN
        v_counts := v_counts || jsonb_build_object('money', idem.import_stage_money(v_t, v_money));
    END IF;
    UPDATE idem.entry_plan
    SET state = 'planned', source_digest = p_source_digest, cursor = p_cursor, items = v_n::integer,
        counts = v_counts, sample = v_sample, items_digest = v_c.digest, staged = true
    WHERE id = p_id
    RETURNING * INTO v_p;
    PERFORM idem.entry_plan_class_check(p_id); -- its class against what the plan cites (--contract, --correction)
    PERFORM idem.audit_write(v_p.planned_by, 'entry.plan', 'entry_plan:' || v_p.id,
        jsonb_build_object('kind', 'import', 'source', v_p.source, 'source_digest', p_source_digest, 'counts', v_counts,
                           'items_digest', encode(v_c.digest, 'hex'), 'staged', true, 'cursor', p_cursor,
                           'hash_function', v_p.hash_function, 'contract', v_p.contract, 'correction', v_p.correction, 'reason', v_p.reason, 'person', v_person)::text);
    RETURN v_p;
END
$$;
