-- object: function idem.import_run_chunk(bigint, text, integer)
-- grant: operator
-- import_run_chunk enters one chunk of a running staged import plan
-- (idem.import_run_begin; IX341 otherwise): the staged rows p_chunk *
-- chunk_rows + 1 .. (p_chunk + 1) * chunk_rows, in the caller's
-- transaction, which should hold nothing else: the chunk's row in
-- idem.import_chunk commits with what it entered, so a chunk enters once
-- (a second call, or a concurrent one once the first commits, returns
-- {"already": true} and writes nothing). The stage must still hold the
-- chunk's rows (IX343 when a crash emptied it: plan again; what entered
-- stays, and a new plan skips it). The rows were checked at the seal;
-- here the live state decides, as in a run in one transaction: an identity
-- with a pending claim or an open quarantine record is refused, and so is
-- a row whose response is JSON null (a plan sealed before that rule), one the
-- inbox already holds is skipped (same class and payload hash) or
-- quarantined with both sides (idem.record_conflict; the old store's
-- answer in the incoming transport, old_store_response), nothing
-- overwritten (a hash-only row, which has no payload to quarantine:
-- conflict_hash_only);
-- the others enter with their original created_at, payload and response
-- (or a hash-only store's hash, idem.imported_hash), marked with the plan;
-- the effect is not run. Only the rows not entered get an item row. The
-- runner must be a person (IX313). Returns {chunk, entered, left_alone}.
CREATE OR REPLACE FUNCTION idem.import_run_chunk(p_id bigint, p_operator text, p_chunk integer)
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
SET jit = off
AS $$
DECLARE
    v_person text := idem.require_person('run an import');
    p_p      idem.entry_plan;
    v_t      text := format('idem.%I', 'import_stage_' || p_id);
    v_size   bigint;
    v_lo     bigint;
    v_hi     bigint;
    v_rows   bigint;
    v_class  text;
    v_trans  jsonb;
    v_left   bigint;
    v_n      bigint;
    v_i      record;
    v_id     idem.identity;
    v_ins    text;
BEGIN
    PERFORM idem.check_operator(p_operator, 'run');
    SELECT * INTO p_p FROM idem.entry_plan WHERE id = p_id FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no entry plan %', coalesce(p_id::text, 'NULL') USING ERRCODE = 'IX340';
    END IF;
    IF p_p.kind <> 'import' OR NOT p_p.staged OR p_p.state <> 'running' THEN
        RAISE EXCEPTION 'entry plan % is % (%): chunks enter only while a staged import plan runs (idem.import_run_begin)',
            p_id, p_p.state, p_p.kind USING ERRCODE = 'IX341';
    END IF;
    v_size := (p_p.counts ->> 'chunk_rows')::bigint;
    IF p_chunk IS NULL OR p_chunk < 0 OR p_chunk * v_size >= p_p.items THEN
        RAISE EXCEPTION 'import plan % has no chunk %', p_id, coalesce(p_chunk::text, 'NULL') USING ERRCODE = 'IX343';
    END IF;
    v_lo := p_chunk * v_size + 1;
    v_hi := least((p_chunk + 1) * v_size, p_p.items);
    INSERT INTO idem.import_chunk (plan_id, chunk, first_n, last_n, run_by, person, db_user)
    VALUES (p_id, p_chunk, v_lo, v_hi, p_operator, v_person, session_user)
    ON CONFLICT (plan_id, chunk) DO NOTHING;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('chunk', p_chunk, 'already', true);
    END IF;
    IF to_regclass(v_t) IS NOT NULL THEN
        EXECUTE format('SELECT count(*) FROM %s s WHERE s.n BETWEEN $1 AND $2', v_t) INTO v_rows USING v_lo, v_hi;
    END IF;
    IF v_rows IS DISTINCT FROM v_hi - v_lo + 1 THEN
        RAISE EXCEPTION 'import plan %: its stage lost rows % to % (an unlogged stage is emptied when the database restarts after a crash): this chunk entered nothing',
            p_id, v_lo, v_hi
            USING ERRCODE = 'IX343', HINT = 'plan the import again: what entered stays, and the new plan skips it';
    END IF;
    SELECT min(k) INTO v_class FROM jsonb_object_keys(p_p.counts -> 'classes') k;
    v_trans := jsonb_build_object('entered_by', 'import', 'entry_plan', p_p.id, 'planned_person', p_p.planned_person,
                                  'approved_person', p_p.approved_person);
    -- Refused: an identity with a pending claim or an open quarantine
    -- record, and a row whose response is JSON null (no response: the
    -- operation is not finished; a plan sealed before that rule holds it).
    EXECUTE format($q$
        INSERT INTO idem.entry_item (plan_id, seq, tenant_id, operation_id, op_class, evidence, created_at, store_hash,
                                     hash_function, fingerprint, outcome)
        SELECT $1, s.n, s.tenant_id, s.operation_id, $2, s.evidence, s.created_at, decode(s.store_hash, 'hex'),
               CASE WHEN s.store_hash IS NOT NULL THEN $3 END,
               idem.import_fingerprint(s.tenant_id, s.operation_id, s.payload_hash, s.store_hash, s.response::text, s.created_at),
               'refused'
        FROM %s s
        -- The (usually few) pending claims and open records are read once
        -- into a hashed subplan, not probed twice a row.
        WHERE s.n BETWEEN $4 AND $5
          AND (s.response IS NULL OR jsonb_typeof(s.response) = 'null'
               OR (s.tenant_id, s.operation_id) IN (
                   SELECT c.tenant_id, c.operation_id FROM idem.pending_claim c
                   UNION ALL
                   SELECT q.tenant_id, q.operation_id FROM idem.quarantine q WHERE q.status = 'open'))$q$, v_t)
    USING p_id, v_class, p_p.hash_function, v_lo, v_hi;
    GET DIAGNOSTICS v_left = ROW_COUNT;
    -- The identities: first a plain INSERT (no speculative insertion: one
    -- descent of the key a row, not two, and no confirmation record); the
    -- key still settles a race. If the inbox holds one of the chunk's
    -- identities already (or a concurrent caller commits one), the unique
    -- violation undoes the attempt and the chunk's identities go in again
    -- with ON CONFLICT DO NOTHING, leaving the inbox's rows alone (below).
    v_ins := format($q$
        INSERT INTO idem.identity (tenant_id, operation_id, op_class, payload_digest, created_at, entry_plan)
        SELECT s.tenant_id, s.operation_id, $1,
               CASE WHEN s.payload IS NOT NULL THEN decode(substr(s.payload_hash, 12), 'hex')
                    WHEN $2::text IS NOT NULL THEN decode(s.store_hash, 'hex')
                    -- a NUL byte: no payload text hashes to this
                    ELSE sha256(decode(s.store_hash, 'hex') || '\x00'::bytea || convert_to('imported without its payload', 'UTF8')) END,
               s.created_at, $3
        FROM %s s
        WHERE s.n BETWEEN $4 AND $5
          AND ($6 = 0 OR NOT EXISTS (SELECT 1 FROM idem.entry_item e WHERE e.plan_id = $3 AND e.tenant_id = s.tenant_id
                                     AND e.operation_id = s.operation_id))$q$, v_t);
    BEGIN
        EXECUTE v_ins USING v_class, p_p.hash_function, p_id, v_lo, v_hi, v_left;
        GET DIAGNOSTICS v_n = ROW_COUNT;
    EXCEPTION WHEN unique_violation THEN
        EXECUTE v_ins || ' ON CONFLICT (tenant_id, operation_id) DO NOTHING'
        USING v_class, p_p.hash_function, p_id, v_lo, v_hi, v_left;
        GET DIAGNOSTICS v_n = ROW_COUNT;
    END;
    -- The bodies (and a hash-only store's hashes) of the identities this
    -- chunk wrote: every row not refused when none was there before.
    EXECUTE format($q$
        INSERT INTO idem.inbox_body (tenant_id, operation_id, created_at, op_class, payload, response, transport)
        SELECT s.tenant_id, s.operation_id, s.created_at, $1, coalesce(s.payload, 'null'), s.response,
               CASE WHEN s.payload IS NULL THEN $2 || jsonb_build_object('imported_without_payload', true,
                        'store_hash', s.store_hash, 'hash_function', $3::text)
                    ELSE $2 END
        FROM %s s
        WHERE s.n BETWEEN $4 AND $5
          AND (($6 = 0 AND $7 = $5 - $4 + 1)
               OR EXISTS (SELECT 1 FROM idem.identity i WHERE i.tenant_id = s.tenant_id AND i.operation_id = s.operation_id
                          AND i.entry_plan = $8))$q$, v_t)
    USING v_class, v_trans, p_p.hash_function, v_lo, v_hi, v_left, v_n, p_id;
    IF (p_p.counts ->> 'hash_only')::bigint > 0 THEN
        EXECUTE format($q$
            INSERT INTO idem.imported_hash (tenant_id, operation_id, store_hash, hash_function, entry_plan)
            SELECT s.tenant_id, s.operation_id, decode(s.store_hash, 'hex'), $1, $2
            FROM %s s
            WHERE s.n BETWEEN $3 AND $4 AND s.store_hash IS NOT NULL
              AND EXISTS (SELECT 1 FROM idem.identity i WHERE i.tenant_id = s.tenant_id AND i.operation_id = s.operation_id
                          AND i.entry_plan = $2)$q$, v_t)
        USING p_p.hash_function, p_id, v_lo, v_hi;
    END IF;
    IF v_n < v_hi - v_lo + 1 - v_left THEN
        v_left := v_left + v_n;
        -- Every row not refused whose identity this chunk did not write
        -- found one there (ON CONFLICT): the inbox held it before.
        FOR v_i IN EXECUTE format($q$
            SELECT s.n, s.tenant_id, s.operation_id, s.evidence, s.created_at, s.store_hash, s.payload, s.payload_hash, s.response
            FROM %s s
            JOIN idem.identity i ON i.tenant_id = s.tenant_id AND i.operation_id = s.operation_id
            WHERE s.n BETWEEN $1 AND $2 AND i.entry_plan IS DISTINCT FROM $3
              AND NOT EXISTS (SELECT 1 FROM idem.entry_item e WHERE e.plan_id = $3 AND e.tenant_id = s.tenant_id
                              AND e.operation_id = s.operation_id)
            ORDER BY s.n$q$, v_t) USING v_lo, v_hi, p_id
        LOOP
            SELECT * INTO v_id FROM idem.identity i WHERE i.tenant_id = v_i.tenant_id AND i.operation_id = v_i.operation_id;
            INSERT INTO idem.entry_item (plan_id, seq, tenant_id, operation_id, op_class, evidence, created_at, store_hash,
                                         hash_function, fingerprint, outcome)
            VALUES (p_id, v_i.n, v_i.tenant_id, v_i.operation_id, v_class, v_i.evidence, v_i.created_at, decode(v_i.store_hash, 'hex'),
                    CASE WHEN v_i.store_hash IS NOT NULL THEN p_p.hash_function END,
                    idem.import_fingerprint(v_i.tenant_id, v_i.operation_id, v_i.payload_hash, v_i.store_hash, v_i.response::text,
                                            v_i.created_at),
                    CASE WHEN v_id.op_class = v_class
                              AND v_id.payload_digest = coalesce(decode(substr(v_i.payload_hash, 12), 'hex'),
                                                                 decode(v_i.store_hash, 'hex'))
                             THEN 'skipped'
                         WHEN v_i.payload IS NOT NULL
                              AND idem.record_conflict(v_id, v_class, v_i.payload, v_i.payload_hash,
                                                       v_trans || jsonb_build_object('evidence', v_i.evidence, 'run_by', p_operator,
                                                                                     'old_store_response', v_i.response))
                                  IS NOT NULL
                             THEN 'quarantined'
                         -- a hash-only row has no payload for a quarantine record's
                         -- incoming side: its own outcome, this item row the evidence
                         WHEN v_i.payload IS NULL THEN 'conflict_hash_only'
                         ELSE 'refused' END);
            v_left := v_left + 1;
        END LOOP;
        v_left := v_left - v_n;
    END IF;
    -- Each row entered or has its outcome (the seal refused a plan holding
    -- an identity twice; this is the database's own check of it).
    IF v_n + v_left <> v_hi - v_lo + 1 THEN
        RAISE EXCEPTION 'import plan %: chunk % accounts for % of its % rows: the source holds an identity twice: nothing entered',
            p_id, p_chunk, v_n + v_left, v_hi - v_lo + 1 USING ERRCODE = 'IX343';
    END IF;
    UPDATE idem.import_chunk SET entered = v_n, left_alone = v_left WHERE plan_id = p_id AND chunk = p_chunk;
    RETURN jsonb_build_object('chunk', p_chunk, 'entered', v_n, 'left_alone', v_left);
END
$$;
