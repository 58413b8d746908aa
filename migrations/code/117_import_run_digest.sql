-- object: function idem.import_run_digest(bigint, text)
-- import_run_digest enters an approved import plan that keeps one digest of
-- its items (idem.import_plan_seal_digest), from the rows its runner read
-- again, in the planned order, into pg_temp.idem_import_stage (checked by
-- idem.import_run, which calls it). All or nothing, set by set:
--   1. one pass over the staged rows: each passes idem.import_item_problem
--      and has its evidence, and together, in the order they were copied,
--      they have the plan's items digest, count, hash-only count, oldest
--      and newest created_at; then the tenants are counted and the sample
--      found among them; else IX343 and nothing enters;
--   2. the body partitions of their real ages, then the identities, then
--      the bodies, each with one INSERT ... SELECT.
-- A staged row whose identity has a pending claim or an open quarantine
-- record is refused; one whose identity the inbox holds already is skipped
-- (same class and payload hash) or quarantined with both sides
-- (conflict_hash_only for a hash-only row, which has no payload to
-- quarantine), nothing overwritten (as idem.import_run). Only the items not entered get an
-- item row (seq: their place in the plan, n; a runner who forges n twice
-- makes that insert fail, and nothing enters), with their outcome and
-- fingerprint. An identity staged twice enters nothing (IX343, or the
-- items' unique key). Not on Citus (IX343). Internal: granted to nobody.
CREATE OR REPLACE FUNCTION idem.import_run_digest(p_id bigint, p_operator text)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
SET jit = off
AS $$
DECLARE
    p_p     idem.entry_plan;
    v_class text;
    v_c     record;
    v_bad   record;
    v_i     record;
    v_id    idem.identity;
    v_from  date;
    v_to    date;
    v_left  bigint;
    v_n     bigint;
    v_trans jsonb;
BEGIN
    SELECT * INTO STRICT p_p FROM idem.entry_plan WHERE id = p_id;
    IF idem.citus_distributed() THEN
        RAISE EXCEPTION 'import plan %: a plan with an items digest does not run on Citus', p_id USING ERRCODE = 'IX343';
    END IF;
    SELECT min(k) INTO v_class FROM jsonb_object_keys(p_p.counts -> 'classes') k;
    -- One pass: every row's problem and the digest of the rows in order,
    -- by runs of 4096 (as idemctl computed it at the plan), each run read
    -- by the stage's index on n (no sort of the whole stage).
    SELECT count(*) INTO v_n FROM pg_temp.idem_import_stage;
    SELECT coalesce(sum(r.staged), 0) AS staged, coalesce(sum(r.bad), 0) AS bad, coalesce(sum(r.hash_only), 0) AS hash_only,
           min(r.oldest) AS oldest, max(r.newest) AS newest, sha256(string_agg(r.digest, ''::bytea ORDER BY k)) AS digest
    INTO v_c
    FROM generate_series(0, (greatest(v_n, 1) - 1) / 4096) k,
    LATERAL (SELECT count(*) AS staged, count(s.store_hash) AS hash_only, min(s.created_at) AS oldest, max(s.created_at) AS newest,
                    count(*) FILTER (WHERE s.evidence IS NULL OR btrim(s.evidence) = '' OR octet_length(s.evidence) > 1024
                                        OR s.evidence ~ '[\x01-\x1f\x7f-\x9f]'
                                        OR idem.import_item_problem(s.tenant_id, s.operation_id, s.payload, s.payload_hash,
                                                                    s.response, s.created_at, s.store_hash) IS NOT NULL) AS bad,
                    sha256(string_agg(idem.import_fingerprint(s.tenant_id, s.operation_id, s.payload_hash, s.store_hash,
                                                              s.response, s.created_at)
                                      || int4send(octet_length(s.evidence)) || convert_to(s.evidence, 'UTF8'), ''::bytea
                                      ORDER BY s.n)) AS digest
             FROM pg_temp.idem_import_stage s
             WHERE s.n BETWEEN k * 4096 + 1 AND (k + 1) * 4096) r;
    -- (a row whose n was forged out of 1..count is in no run: counted short)
    IF v_c.staged <> v_n THEN
        v_c.staged := -1;
    END IF;
    IF v_c.bad > 0 THEN
        SELECT s.tenant_id, s.operation_id,
               coalesce(idem.import_item_problem(s.tenant_id, s.operation_id, s.payload, s.payload_hash, s.response, s.created_at,
                                                 s.store_hash), 'its evidence is empty, too long or holds control characters') AS problem
        INTO v_bad
        FROM pg_temp.idem_import_stage s
        WHERE s.evidence IS NULL OR btrim(s.evidence) = '' OR octet_length(s.evidence) > 1024 OR s.evidence ~ '[\x01-\x1f\x7f-\x9f]'
           OR idem.import_item_problem(s.tenant_id, s.operation_id, s.payload, s.payload_hash, s.response, s.created_at,
                                       s.store_hash) IS NOT NULL
        ORDER BY s.n LIMIT 1;
        RAISE EXCEPTION 'import plan %: the source''s row (%, %): %: nothing entered', p_id, v_bad.tenant_id, v_bad.operation_id,
            v_bad.problem USING ERRCODE = 'IX343';
    END IF;
    IF v_c.staged <> p_p.items OR v_c.digest IS DISTINCT FROM p_p.items_digest OR v_c.hash_only <> (p_p.counts ->> 'hash_only')::bigint
       OR v_c.oldest IS DISTINCT FROM (p_p.counts ->> 'oldest')::timestamptz
       OR v_c.newest IS DISTINCT FROM (p_p.counts ->> 'newest')::timestamptz
       OR (SELECT count(*) FROM (SELECT s.tenant_id FROM pg_temp.idem_import_stage s GROUP BY 1) t)
          <> (p_p.counts ->> 'tenants')::bigint
       OR (SELECT count(DISTINCT x.n) FROM jsonb_array_elements(p_p.sample) WITH ORDINALITY AS x(v, n)
           JOIN pg_temp.idem_import_stage s
             ON s.tenant_id = x.v ->> 'tenant_id' AND s.operation_id = x.v ->> 'operation_id'
            AND s.created_at = (x.v ->> 'created_at')::timestamptz AND s.evidence = x.v ->> 'evidence')
          <> jsonb_array_length(p_p.sample) THEN
        RAISE EXCEPTION 'import plan %: the source changed since the plan: the % rows read again are not the % planned ones (their digest, counts or sample differ): nothing entered',
            p_id, v_c.staged, p_p.items
            USING ERRCODE = 'IX343', HINT = 'plan the import again from the source as it is now';
    END IF;
    v_trans := jsonb_build_object('entered_by', 'import', 'entry_plan', p_p.id, 'planned_person', p_p.planned_person,
                                  'approved_person', p_p.approved_person);
    v_from := (v_c.oldest AT TIME ZONE 'UTC')::date;
    v_to := (v_c.newest AT TIME ZONE 'UTC')::date;
    WHILE v_from <= v_to LOOP
        PERFORM idem.inbox_body_ensure(v_from, least(v_from + 399, v_to));
        v_from := v_from + 400;
    END LOOP;
    -- Refused: an identity with a pending claim or an open quarantine record.
    INSERT INTO idem.entry_item (plan_id, seq, tenant_id, operation_id, op_class, evidence, created_at, store_hash, hash_function,
                                 fingerprint, outcome)
    SELECT p_p.id, s.n, s.tenant_id, s.operation_id, v_class, s.evidence, s.created_at, decode(s.store_hash, 'hex'),
           CASE WHEN s.store_hash IS NOT NULL THEN p_p.hash_function END,
           idem.import_fingerprint(s.tenant_id, s.operation_id, s.payload_hash, s.store_hash, s.response, s.created_at), 'refused'
    FROM pg_temp.idem_import_stage s
    WHERE EXISTS (SELECT 1 FROM idem.pending_claim c WHERE c.tenant_id = s.tenant_id AND c.operation_id = s.operation_id)
       OR EXISTS (SELECT 1 FROM idem.quarantine q WHERE q.tenant_id = s.tenant_id AND q.operation_id = s.operation_id
                  AND q.status = 'open');
    GET DIAGNOSTICS v_left = ROW_COUNT;
    INSERT INTO idem.identity (tenant_id, operation_id, op_class, payload_digest, created_at, entry_plan)
    SELECT s.tenant_id, s.operation_id, v_class,
           CASE WHEN s.payload IS NOT NULL THEN decode(substr(s.payload_hash, 12), 'hex')
                WHEN p_p.hash_function IS NOT NULL THEN decode(s.store_hash, 'hex')
                -- a NUL byte: no payload text hashes to this
                ELSE sha256(decode(s.store_hash, 'hex') || '\x00'::bytea || convert_to('imported without its payload', 'UTF8')) END,
           s.created_at, p_p.id
    FROM pg_temp.idem_import_stage s
    WHERE v_left = 0
       OR NOT EXISTS (SELECT 1 FROM idem.entry_item e WHERE e.plan_id = p_p.id AND e.tenant_id = s.tenant_id
                      AND e.operation_id = s.operation_id)
    ON CONFLICT (tenant_id, operation_id) DO NOTHING;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    -- The bodies (and a hash-only store's hashes) of the identities this
    -- plan wrote: every row not refused when none was there before.
    INSERT INTO idem.inbox_body (tenant_id, operation_id, created_at, op_class, payload, response, transport)
    SELECT s.tenant_id, s.operation_id, s.created_at, v_class, coalesce(s.payload, 'null'), s.response::jsonb,
           CASE WHEN s.payload IS NULL THEN v_trans || jsonb_build_object('imported_without_payload', true,
                    'store_hash', s.store_hash, 'hash_function', p_p.hash_function)
                ELSE v_trans END
    FROM pg_temp.idem_import_stage s
    WHERE (v_left = 0 AND v_n = p_p.items)
       OR EXISTS (SELECT 1 FROM idem.identity i WHERE i.tenant_id = s.tenant_id AND i.operation_id = s.operation_id
                  AND i.entry_plan = p_p.id);
    IF (p_p.counts ->> 'hash_only')::bigint > 0 THEN
        INSERT INTO idem.imported_hash (tenant_id, operation_id, store_hash, hash_function, entry_plan)
        SELECT s.tenant_id, s.operation_id, decode(s.store_hash, 'hex'), p_p.hash_function, p_p.id
        FROM pg_temp.idem_import_stage s
        WHERE s.store_hash IS NOT NULL
          AND EXISTS (SELECT 1 FROM idem.identity i WHERE i.tenant_id = s.tenant_id AND i.operation_id = s.operation_id
                      AND i.entry_plan = p_p.id);
    END IF;
    IF v_n = p_p.items - v_left THEN
        RETURN;
    END IF;
    v_left := v_left + v_n;
    -- Every row not refused whose identity this plan did not write found
    -- one there (ON CONFLICT): the inbox held it before.
    FOR v_i IN
        SELECT s.n, s.tenant_id, s.operation_id, s.evidence, s.created_at, s.store_hash, s.payload, s.payload_hash, s.response
        FROM pg_temp.idem_import_stage s
        JOIN idem.identity i ON i.tenant_id = s.tenant_id AND i.operation_id = s.operation_id
        WHERE i.entry_plan IS DISTINCT FROM p_p.id
          AND NOT EXISTS (SELECT 1 FROM idem.entry_item e WHERE e.plan_id = p_p.id AND e.tenant_id = s.tenant_id
                          AND e.operation_id = s.operation_id)
        ORDER BY s.n
    LOOP
        SELECT * INTO v_id FROM idem.identity i WHERE i.tenant_id = v_i.tenant_id AND i.operation_id = v_i.operation_id;
        INSERT INTO idem.entry_item (plan_id, seq, tenant_id, operation_id, op_class, evidence, created_at, store_hash, hash_function,
                                     fingerprint, outcome)
        VALUES (p_p.id, v_i.n, v_i.tenant_id, v_i.operation_id, v_class, v_i.evidence, v_i.created_at, decode(v_i.store_hash, 'hex'),
                CASE WHEN v_i.store_hash IS NOT NULL THEN p_p.hash_function END,
                idem.import_fingerprint(v_i.tenant_id, v_i.operation_id, v_i.payload_hash, v_i.store_hash, v_i.response,
                                        v_i.created_at),
                CASE WHEN v_id.op_class = v_class
                          AND v_id.payload_digest = coalesce(decode(substr(v_i.payload_hash, 12), 'hex'), decode(v_i.store_hash, 'hex'))
                         THEN 'skipped'
                     WHEN v_i.payload IS NOT NULL
                          AND idem.record_conflict(v_id, v_class, v_i.payload, v_i.payload_hash,
                                                   v_trans || jsonb_build_object('evidence', v_i.evidence, 'run_by', p_operator)) IS NOT NULL
                         THEN 'quarantined'
                     -- a hash-only row has no payload for a quarantine record's
                     -- incoming side: its own outcome, this item row the evidence
                     WHEN v_i.payload IS NULL THEN 'conflict_hash_only'
                     ELSE 'refused' END);
        v_left := v_left + 1;
    END LOOP;
    -- Each staged row entered, or has its outcome (a second row of an
    -- identity already there breaks the items' unique key); fewer: an
    -- identity this plan entered was staged twice.
    IF v_left <> p_p.items THEN
        RAISE EXCEPTION 'import plan %: the source holds an identity twice (one plan holds it once): nothing entered', p_id
            USING ERRCODE = 'IX343', HINT = 'deduplicate the source''s query (one row per tenant and key), then plan again';
    END IF;
END
$$;
