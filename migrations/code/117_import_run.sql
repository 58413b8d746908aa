-- object: function idem.import_run(bigint, text)
-- import_run enters the items of an approved import plan, in the caller's
-- transaction (idem.entry_plan_run), from the rows the runner read again
-- from the source and staged in pg_temp.idem_import_stage
-- (idem.import_stage_open: the schema owner's table; any other is refused,
-- IX341). All or nothing, set by set:
--   1. every staged row passes the checks idem.execute makes of a request
--      (idem.import_item_problem: identity, jcs-sha256 of exactly the
--      payload's bytes, limits, JSON), else IX343 naming it;
--   2. the staged rows are exactly the planned items: each one's
--      fingerprint (idem.import_fingerprint, recomputed here) is its
--      planned item's, no planned item is missing, none is staged twice;
--      else IX343 "the source changed since the plan", naming the first
--      row that differs. Nothing enters then: plan again;
--   3. the body partitions of their real ages (idem.inbox_body_ensure:
--      months long past whole, recent days each), then every identity the
--      inbox does not hold yet, with its ORIGINAL created_at (identity and
--      body), its payload and response, marked with the plan; the effect is
--      not run.
-- An item whose identity has a pending claim or an open quarantine record
-- is refused. An identity the inbox already holds (before, or written by a
-- concurrent caller meanwhile: the unique key settles it) is left alone:
-- skipped when it holds the same payload hash and class, quarantined with
-- both sides (idem.record_conflict, the old store's answer in the incoming
-- side's transport: old_store_response) otherwise (conflict_hash_only for
-- an item of a hash-only store, which has no payload to quarantine);
-- nothing is overwritten. An
-- item of a hash-only store enters with the store's hash as its digest when
-- the hash function was declared (a request whose payload bytes hash to it
-- is the same request), else with a digest no payload text can have, and is
-- listed in idem.imported_hash: a retry that does not match is a conflict
-- "imported without its payload". Only the items not entered get an
-- outcome written (refused, skipped, quarantined, conflict_hash_only).
-- Internal: granted to nobody.
CREATE OR REPLACE FUNCTION idem.import_run(p_id bigint, p_operator text)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    p_p     idem.entry_plan;
    v_from  date;
    v_to    date;
    v_c     record;
    v_bad   record;
    v_i     record;
    v_n     bigint;
    v_left  bigint;
    v_class text;
    v_id    idem.identity;
    v_trans jsonb;
    v_citus boolean := idem.citus_distributed();
    v_ts    text[];
    v_os    text[];
    v_cur   refcursor;
BEGIN
    SELECT * INTO STRICT p_p FROM idem.entry_plan WHERE id = p_id;
    -- Only the stage import_stage_open made: the schema owner's plain
    -- table, which the runner could fill but not give code to run here.
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_class c
                   WHERE c.oid = pg_catalog.to_regclass('pg_temp.idem_import_stage') AND c.relkind = 'r'
                     AND c.relowner = (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = current_user)
                     AND NOT c.relrowsecurity AND NOT c.relhastriggers AND NOT c.relhasrules) THEN
        RAISE EXCEPTION 'import plan %: its rows are not staged (idemctl import run reads the source again)', p_id
            USING ERRCODE = 'IX341';
    END IF;
    -- The stage opened for this plan, not another's (whose stage may have
    -- no key on the identity: a planned item staged twice, another not).
    IF pg_catalog.obj_description(pg_catalog.to_regclass('pg_temp.idem_import_stage'), 'pg_class')
       IS DISTINCT FROM 'stage of import plan ' || p_id THEN
        RAISE EXCEPTION 'import plan %: the stage was opened for another plan', p_id
            USING ERRCODE = 'IX343', HINT = 'open the stage with idem.import_stage_open(' || p_id || ') in the run''s transaction; nothing was entered';
    END IF;
    IF p_p.items_digest IS NOT NULL THEN
        -- a plan that keeps one digest of its items, not an item a row
        PERFORM idem.import_run_digest(p_id, p_operator);
        RETURN;
    END IF;
    -- One pass: every staged row's problem and its planned fingerprint
    -- (an identity is staged once: the stage's primary key).
    SELECT count(*) AS staged,
           count(*) FILTER (WHERE e.fingerprint = idem.import_fingerprint(
               s.tenant_id, s.operation_id, s.payload_hash, s.store_hash, s.response, s.created_at)) AS matched,
           count(*) FILTER (WHERE idem.import_item_problem(s.tenant_id, s.operation_id, s.payload, s.payload_hash, s.response,
                                                           s.created_at, s.store_hash) IS NOT NULL) AS bad
    INTO v_c
    FROM pg_temp.idem_import_stage s
    LEFT JOIN idem.entry_item e ON e.plan_id = p_id AND e.tenant_id = s.tenant_id AND e.operation_id = s.operation_id;
    IF v_c.bad > 0 THEN
        SELECT s.tenant_id, s.operation_id,
               idem.import_item_problem(s.tenant_id, s.operation_id, s.payload, s.payload_hash, s.response, s.created_at,
                                        s.store_hash) AS problem
        INTO v_bad
        FROM pg_temp.idem_import_stage s
        WHERE idem.import_item_problem(s.tenant_id, s.operation_id, s.payload, s.payload_hash, s.response, s.created_at,
                                       s.store_hash) IS NOT NULL
        LIMIT 1;
        RAISE EXCEPTION 'import plan %: the source''s row (%, %): %: nothing entered', p_id, v_bad.tenant_id, v_bad.operation_id,
            v_bad.problem USING ERRCODE = 'IX343';
    END IF;
    IF v_c.staged <> p_p.items OR v_c.matched <> p_p.items THEN
        SELECT s.tenant_id, s.operation_id,
               CASE WHEN e.seq IS NULL THEN 'not in the plan' ELSE 'not what was planned' END AS why
        INTO v_bad
        FROM pg_temp.idem_import_stage s
        LEFT JOIN idem.entry_item e ON e.plan_id = p_id AND e.tenant_id = s.tenant_id AND e.operation_id = s.operation_id
        WHERE e.seq IS NULL OR e.fingerprint IS DISTINCT FROM idem.import_fingerprint(
                  s.tenant_id, s.operation_id, s.payload_hash, s.store_hash, s.response, s.created_at)
        LIMIT 1;
        IF NOT FOUND THEN
            SELECT e.tenant_id, e.operation_id, 'planned but not read again' AS why
            INTO v_bad
            FROM idem.entry_item e
            WHERE e.plan_id = p_id
              AND NOT EXISTS (SELECT 1 FROM pg_temp.idem_import_stage s
                              WHERE s.tenant_id = e.tenant_id AND s.operation_id = e.operation_id)
            ORDER BY e.seq LIMIT 1;
        END IF;
        RAISE EXCEPTION 'import plan %: the source changed since the plan: (%, %) %; % rows read again, % planned: nothing entered',
            p_id, v_bad.tenant_id, v_bad.operation_id, v_bad.why, v_c.staged, p_p.items
            USING ERRCODE = 'IX343', HINT = 'plan the import again from the source as it is now';
    END IF;
    v_trans := jsonb_build_object('entered_by', 'import', 'entry_plan', p_p.id, 'planned_person', p_p.planned_person,
                                  'approved_person', p_p.approved_person);
    SELECT (min(created_at) AT TIME ZONE 'UTC')::date, (max(created_at) AT TIME ZONE 'UTC')::date
    INTO v_from, v_to
    FROM idem.entry_item WHERE plan_id = p_p.id;
    WHILE v_from <= v_to LOOP
        PERFORM idem.inbox_body_ensure(v_from, least(v_from + 399, v_to));
        v_from := v_from + 400;
    END LOOP;
    IF v_citus THEN
        -- On Citus the plan's items (a coordinator table) cannot be
        -- correlated with distributed rows: the keys held by a claim or an
        -- open record are read first, by the staged keys, then marked.
        SELECT array_agg(tenant_id), array_agg(operation_id) INTO v_ts, v_os FROM pg_temp.idem_import_stage;
        SELECT array_agg(k.tenant_id), array_agg(k.operation_id) INTO v_ts, v_os
        FROM (SELECT c.tenant_id, c.operation_id FROM idem.pending_claim c
              WHERE (c.tenant_id, c.operation_id) IN (SELECT * FROM unnest(v_ts, v_os))
              UNION
              SELECT q.tenant_id, q.operation_id FROM idem.quarantine q
              WHERE q.status = 'open' AND (q.tenant_id, q.operation_id) IN (SELECT * FROM unnest(v_ts, v_os))) k;
        UPDATE idem.entry_item e SET outcome = 'refused'
        WHERE e.plan_id = p_p.id AND (e.tenant_id, e.operation_id) IN (SELECT * FROM unnest(v_ts, v_os));
    ELSE
        UPDATE idem.entry_item e SET outcome = 'refused'
        WHERE e.plan_id = p_p.id
          AND (EXISTS (SELECT 1 FROM idem.pending_claim c WHERE c.tenant_id = e.tenant_id AND c.operation_id = e.operation_id)
               OR EXISTS (SELECT 1 FROM idem.quarantine q WHERE q.tenant_id = e.tenant_id AND q.operation_id = e.operation_id
                          AND q.status = 'open'));
    END IF;
    GET DIAGNOSTICS v_left = ROW_COUNT;
    -- The plan's class when it has one (its counts were computed here, at
    -- the seal): then the staged rows, all checked against the plan, enter
    -- without looking their items up again.
    SELECT CASE WHEN count(*) = 1 THEN min(k) END INTO v_class FROM jsonb_object_keys(p_p.counts -> 'classes') k;
    IF v_left = 0 AND v_class IS NOT NULL THEN
        INSERT INTO idem.identity (tenant_id, operation_id, op_class, payload_digest, created_at, entry_plan)
        SELECT s.tenant_id, s.operation_id, v_class,
               CASE WHEN s.payload IS NOT NULL THEN decode(substr(s.payload_hash, 12), 'hex')
                    WHEN p_p.hash_function IS NOT NULL THEN decode(s.store_hash, 'hex')
                    -- a NUL byte: no payload text hashes to this
                    ELSE sha256(decode(s.store_hash, 'hex') || '\x00'::bytea || convert_to('imported without its payload', 'UTF8')) END,
               s.created_at, p_p.id
        FROM pg_temp.idem_import_stage s
        ON CONFLICT (tenant_id, operation_id) DO NOTHING;
    ELSE
        INSERT INTO idem.identity (tenant_id, operation_id, op_class, payload_digest, created_at, entry_plan)
        SELECT s.tenant_id, s.operation_id, e.op_class,
               CASE WHEN s.payload IS NOT NULL THEN decode(substr(s.payload_hash, 12), 'hex')
                    WHEN e.hash_function IS NOT NULL THEN e.store_hash
                    -- a NUL byte: no payload text hashes to this
                    ELSE sha256(e.store_hash || '\x00'::bytea || convert_to('imported without its payload', 'UTF8')) END,
               s.created_at, p_p.id
        FROM pg_temp.idem_import_stage s
        JOIN idem.entry_item e ON e.plan_id = p_p.id AND e.tenant_id = s.tenant_id AND e.operation_id = s.operation_id
        WHERE e.outcome IS NULL
        ON CONFLICT (tenant_id, operation_id) DO NOTHING;
    END IF;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    IF v_citus THEN
        -- On Citus the count an INSERT ... SELECT through the coordinator
        -- reports includes the rows ON CONFLICT left out. The identities
        -- this plan wrote are read back by the plan's mark (a distributed
        -- read): their count, and their keys in place of a join below.
        SELECT array_agg(i.tenant_id), array_agg(i.operation_id) INTO v_ts, v_os
        FROM idem.identity i WHERE i.entry_plan = p_p.id;
        v_ts := coalesce(v_ts, '{}');
        v_os := coalesce(v_os, '{}');
        v_n := cardinality(v_ts);
    END IF;
    IF v_left = 0 AND v_class IS NOT NULL AND v_n = p_p.items THEN
        -- every staged row entered its identity: each gets its body
        INSERT INTO idem.inbox_body (tenant_id, operation_id, created_at, op_class, payload, response, transport)
        SELECT s.tenant_id, s.operation_id, s.created_at, v_class, coalesce(s.payload, 'null'), s.response::jsonb,
               CASE WHEN s.payload IS NULL THEN v_trans || jsonb_build_object('imported_without_payload', true,
                        'store_hash', s.store_hash, 'hash_function', p_p.hash_function)
                    ELSE v_trans END
        FROM pg_temp.idem_import_stage s;
    ELSIF v_citus THEN
        -- only the identities this plan wrote get a body
        INSERT INTO idem.inbox_body (tenant_id, operation_id, created_at, op_class, payload, response, transport)
        SELECT s.tenant_id, s.operation_id, s.created_at, e.op_class, coalesce(s.payload, 'null'), s.response::jsonb,
               CASE WHEN s.payload IS NULL THEN v_trans || jsonb_build_object('imported_without_payload', true,
                        'store_hash', s.store_hash, 'hash_function', e.hash_function)
                    ELSE v_trans END
        FROM pg_temp.idem_import_stage s
        JOIN idem.entry_item e ON e.plan_id = p_p.id AND e.tenant_id = s.tenant_id AND e.operation_id = s.operation_id
        WHERE e.outcome IS NULL AND (s.tenant_id, s.operation_id) IN (SELECT * FROM unnest(v_ts, v_os));
    ELSE
        -- only the identities this plan wrote get a body
        INSERT INTO idem.inbox_body (tenant_id, operation_id, created_at, op_class, payload, response, transport)
        SELECT s.tenant_id, s.operation_id, s.created_at, e.op_class, coalesce(s.payload, 'null'), s.response::jsonb,
               CASE WHEN s.payload IS NULL THEN v_trans || jsonb_build_object('imported_without_payload', true,
                        'store_hash', s.store_hash, 'hash_function', e.hash_function)
                    ELSE v_trans END
        FROM pg_temp.idem_import_stage s
        JOIN idem.entry_item e ON e.plan_id = p_p.id AND e.tenant_id = s.tenant_id AND e.operation_id = s.operation_id
        JOIN idem.identity i ON i.tenant_id = s.tenant_id AND i.operation_id = s.operation_id
        WHERE e.outcome IS NULL AND i.entry_plan = p_p.id;
    END IF;
    IF coalesce((p_p.counts ->> 'hash_only')::bigint, 1) > 0 AND v_citus THEN
        INSERT INTO idem.imported_hash (tenant_id, operation_id, store_hash, hash_function, entry_plan)
        SELECT e.tenant_id, e.operation_id, e.store_hash, e.hash_function, p_p.id
        FROM idem.entry_item e
        WHERE e.plan_id = p_p.id AND e.store_hash IS NOT NULL AND e.outcome IS NULL
          AND (e.tenant_id, e.operation_id) IN (SELECT * FROM unnest(v_ts, v_os));
    ELSIF coalesce((p_p.counts ->> 'hash_only')::bigint, 1) > 0 THEN
        INSERT INTO idem.imported_hash (tenant_id, operation_id, store_hash, hash_function, entry_plan)
        SELECT e.tenant_id, e.operation_id, e.store_hash, e.hash_function, p_p.id
        FROM idem.entry_item e JOIN idem.identity i ON i.tenant_id = e.tenant_id AND i.operation_id = e.operation_id
        WHERE e.plan_id = p_p.id AND e.store_hash IS NOT NULL AND e.outcome IS NULL AND i.entry_plan = p_p.id;
    END IF;
    -- What the inbox held already: the same request is skipped, another
    -- one quarantined with both sides (nothing to look for when every item
    -- not refused entered).
    IF v_n = p_p.items - v_left THEN
        RETURN;
    END IF;
    -- Every item not refused whose identity this plan did not write found
    -- one there (ON CONFLICT): the inbox held it before.
    IF v_citus THEN
        OPEN v_cur FOR
            SELECT e.seq, e.tenant_id, e.operation_id, e.op_class, e.evidence, e.store_hash, s.payload, s.payload_hash, s.response
            FROM pg_temp.idem_import_stage s
            JOIN idem.entry_item e ON e.plan_id = p_p.id AND e.tenant_id = s.tenant_id AND e.operation_id = s.operation_id
            WHERE e.outcome IS NULL AND (s.tenant_id, s.operation_id) NOT IN (SELECT * FROM unnest(v_ts, v_os))
            ORDER BY e.seq;
    ELSE
        OPEN v_cur FOR
            SELECT e.seq, e.tenant_id, e.operation_id, e.op_class, e.evidence, e.store_hash, s.payload, s.payload_hash, s.response
            FROM pg_temp.idem_import_stage s
            JOIN idem.entry_item e ON e.plan_id = p_p.id AND e.tenant_id = s.tenant_id AND e.operation_id = s.operation_id
            JOIN idem.identity i ON i.tenant_id = s.tenant_id AND i.operation_id = s.operation_id
            WHERE e.outcome IS NULL AND i.entry_plan IS DISTINCT FROM p_p.id
            ORDER BY e.seq;
    END IF;
    LOOP
        FETCH v_cur INTO v_i;
        EXIT WHEN NOT FOUND;
        SELECT * INTO v_id FROM idem.identity i WHERE i.tenant_id = v_i.tenant_id AND i.operation_id = v_i.operation_id;
        IF v_id.op_class = v_i.op_class
           AND v_id.payload_digest = coalesce(decode(substr(v_i.payload_hash, 12), 'hex'), v_i.store_hash) THEN
            UPDATE idem.entry_item SET outcome = 'skipped' WHERE plan_id = p_p.id AND seq = v_i.seq;
        ELSIF v_i.payload IS NOT NULL
              AND idem.record_conflict(v_id, v_i.op_class, v_i.payload, v_i.payload_hash,
                                       v_trans || jsonb_build_object('evidence', v_i.evidence, 'run_by', p_operator,
                                                                     'old_store_response', v_i.response::jsonb)) IS NOT NULL THEN
            UPDATE idem.entry_item SET outcome = 'quarantined' WHERE plan_id = p_p.id AND seq = v_i.seq;
        ELSIF v_i.payload IS NULL THEN
            -- a hash-only item has no payload for a quarantine record's
            -- incoming side: its own outcome, its item row the evidence
            UPDATE idem.entry_item SET outcome = 'conflict_hash_only' WHERE plan_id = p_p.id AND seq = v_i.seq;
        ELSE
            -- the identity vanished meanwhile (a purge): nothing entered
            UPDATE idem.entry_item SET outcome = 'refused' WHERE plan_id = p_p.id AND seq = v_i.seq;
        END IF;
    END LOOP;
    CLOSE v_cur;
END
$$;
