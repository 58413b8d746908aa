-- object: function idem.entry_plan_run(bigint, text)
-- grant: operator
-- entry_plan_run enters an approved plan's identities (IX341 otherwise), in
-- one transaction, each with its payload and response, marked with the plan
-- (identity.entry_plan) and its transport naming the plan, the evidence and
-- both persons; the effect is not run. The unique key settles a race: an
-- identity the inbox holds (before, or written meanwhile) is left alone:
-- 'exists' when it holds the same payload hash and class, else quarantined
-- with both sides ('quarantined', idem.record_conflict, as an import's
-- conflict is: same identity, another payload is a conflict, never a
-- silent success; the answer known from outside kept as the incoming
-- side's old_store_response, and accept-as-new refused for it, IX128); one with a pending claim or an open quarantine record,
-- or whose response is JSON null (no response: a plan made before
-- idem.entry_plan_create refused it), is refused ('refused'). The
-- runner must be a person (IX313). An import plan runs its own way
-- (idem.import_run: original created_at kept, same payload skipped, another
-- payload quarantined), from the rows idemctl import run staged in this
-- transaction (idem.import_stage_open); without them, and for a staged
-- plan (idem.import_run_begin, _chunk and _finish), IX341 naming idemctl
-- import run. Audited, with the source's digest and the counts.
-- Returns the plan.
CREATE OR REPLACE FUNCTION idem.entry_plan_run(p_id bigint, p_operator text)
RETURNS idem.entry_plan
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_person text := idem.require_person('run an entry plan');
    v_p      idem.entry_plan := idem.entry_plan_lock(p_id);
    v_i      idem.entry_item;
    v_out    text;
    v_n      integer;
    v_c      record;
    v_id     idem.identity;
BEGIN
    PERFORM idem.check_operator(p_operator, 'run');
    -- An import runs from what idemctl import run stages (its source read
    -- again into pg_temp.idem_import_stage, idem.import_stage_open), or a
    -- staged plan from its stage by chunks: never by idemctl record run.
    IF v_p.kind = 'import' AND (v_p.staged OR to_regclass('pg_temp.idem_import_stage') IS NULL) THEN
        RAISE EXCEPTION 'entry plan % is an import plan: run it with idemctl import run % (on Citus with its source: --from-ndjson FILE or --from-postgres DSN --query SQL)',
                p_id, p_id
            USING ERRCODE = 'IX341';
    END IF;
    IF v_p.state <> 'approved' THEN
        RAISE EXCEPTION 'entry plan % is %: only an approved plan runs', p_id, v_p.state USING ERRCODE = 'IX341';
    END IF;
    PERFORM idem.entry_plan_class_check(p_id); -- a class may have become money since the approval
    IF v_p.kind = 'import' THEN
        PERFORM idem.import_run(v_p.id, p_operator);
    END IF;
    FOR v_i IN SELECT * FROM idem.entry_item WHERE plan_id = p_id AND v_p.kind = 'record' ORDER BY seq LOOP
        -- JSON null is no response: an item of a plan made before that
        -- rule would be answered already_applied with nothing.
        IF v_i.response IS NULL OR jsonb_typeof(v_i.response) = 'null'
           OR EXISTS (SELECT 1 FROM idem.pending_claim c WHERE c.tenant_id = v_i.tenant_id AND c.operation_id = v_i.operation_id)
           OR EXISTS (SELECT 1 FROM idem.quarantine q WHERE q.tenant_id = v_i.tenant_id
                      AND q.operation_id = v_i.operation_id AND q.status = 'open') THEN
            v_out := 'refused';
        ELSE
            INSERT INTO idem.identity (tenant_id, operation_id, op_class, payload_digest, entry_plan)
            VALUES (v_i.tenant_id, v_i.operation_id, v_i.op_class, decode(substr(v_i.payload_hash, 12), 'hex'), p_id)
            ON CONFLICT DO NOTHING;
            GET DIAGNOSTICS v_n = ROW_COUNT;
            IF v_n = 1 THEN
                INSERT INTO idem.inbox_body (tenant_id, operation_id, created_at, op_class, payload, response, transport)
                VALUES (v_i.tenant_id, v_i.operation_id, now(), v_i.op_class, v_i.payload, v_i.response,
                        jsonb_build_object('entered_by', v_p.kind, 'entry_plan', p_id, 'evidence', v_i.evidence,
                                           'planned_person', v_p.planned_person, 'approved_person', v_p.approved_person));
                v_out := 'entered';
            ELSE
                SELECT * INTO v_id FROM idem.identity i
                WHERE i.tenant_id = v_i.tenant_id AND i.operation_id = v_i.operation_id;
                IF v_id.op_class = v_i.op_class AND v_id.payload_digest = decode(substr(v_i.payload_hash, 12), 'hex') THEN
                    v_out := 'exists';
                ELSIF idem.record_conflict(v_id, v_i.op_class, v_i.payload, v_i.payload_hash,
                          jsonb_build_object('entered_by', v_p.kind, 'entry_plan', p_id, 'evidence', v_i.evidence,
                                             'planned_person', v_p.planned_person, 'approved_person', v_p.approved_person,
                                             'run_by', p_operator, 'old_store_response', v_i.response)) IS NOT NULL THEN
                    v_out := 'quarantined';
                ELSE
                    v_out := 'refused'; -- the identity vanished meanwhile (a purge): nothing entered
                END IF;
            END IF;
        END IF;
        UPDATE idem.entry_item SET outcome = v_out WHERE plan_id = p_id AND seq = v_i.seq;
    END LOOP;
    -- An import writes no outcome for the items it entered (idem.import_run;
    -- idem.import_run_digest writes an item row only for the others).
    SELECT CASE WHEN v_p.kind = 'import' THEN v_p.items - count(outcome) ELSE count(*) FILTER (WHERE outcome = 'entered') END
               AS n_entered,
           count(*) FILTER (WHERE outcome = 'exists') AS n_exists, count(*) FILTER (WHERE outcome = 'refused') AS n_refused,
           count(*) FILTER (WHERE outcome = 'skipped') AS n_skipped, count(*) FILTER (WHERE outcome = 'quarantined') AS n_quarantined,
           count(*) FILTER (WHERE outcome = 'conflict_hash_only') AS n_conflict_hash_only
    INTO v_c
    FROM idem.entry_item WHERE plan_id = p_id;
    UPDATE idem.entry_plan
    SET state = 'done', started_at = now(), finished_at = now(),
        entered = v_c.n_entered,
        left_alone = v_c.n_exists + v_c.n_refused + v_c.n_skipped + v_c.n_quarantined + v_c.n_conflict_hash_only
    WHERE id = p_id
    RETURNING * INTO v_p;
    PERFORM idem.audit_write(p_operator, 'entry.run', 'entry_plan:' || p_id,
        jsonb_build_object('kind', v_p.kind, 'entered', v_p.entered, 'left_alone', v_p.left_alone,
                           'exists', v_c.n_exists, 'refused', v_c.n_refused, 'skipped', v_c.n_skipped,
                           'quarantined', v_c.n_quarantined, 'conflict_hash_only', v_c.n_conflict_hash_only,
                           'source_digest', v_p.source_digest, 'counts', v_p.counts, 'cursor', v_p.cursor,
                           'person', v_person)::text);
    RETURN v_p;
END
$$;
