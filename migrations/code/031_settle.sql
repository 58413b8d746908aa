-- object: function idem.settle(text, text, text, text, text, jsonb, boolean)
-- settle is steps 2-4 of the protocol for one identity, settled by the primary
-- key of idem.identity, for a request that check_request accepted:
--   'claimed'          the identity is new and this transaction holds its row;
--                      with p_with_body the body is written too (response NULL
--                      until idem.complete), else the caller writes it;
--   'already_applied'  same hash and class, body present: the saved response;
--   'purged'           same hash and class, purged under a proven horizon: it
--                      was applied, the response is no longer kept (NULL);
--   'conflict'         another hash or class: quarantined, nothing runs
--                      (the record keeps p_transport without the keys an
--                      import's or a record's run writes: entered_by,
--                      entry_plan, planned_person, approved_person, run_by,
--                      old_store_response, evidence).
-- Under READ COMMITTED a concurrent claimer of the same identity waits on the
-- unique index for the first one to commit or roll back, then reads its row;
-- under REPEATABLE READ or SERIALIZABLE the loser gets 40001 and retries.
-- A replay takes no lock and writes nothing: the identity row is never
-- updated but for its holds (which a replay does not read), the body row is
-- written once with its response, and a purge either deletes it (MVCC: a
-- snapshot that saw it keeps seeing it) or swaps its day, which a snapshot
-- taken before cannot see through (idem.snapshot_predates_swap): such a
-- reader reads again or gets 40001, never "purged" for a body that was kept.
CREATE OR REPLACE FUNCTION idem.settle(
    p_tenant_id text, p_operation_id text, p_op_class text, p_payload text, p_payload_hash text,
    p_transport jsonb, p_with_body boolean, OUT outcome text, OUT response jsonb, OUT quarantine_id bigint
)
LANGUAGE plpgsql
AS $$
#variable_conflict use_column
DECLARE
    v_digest bytea := decode(substr(p_payload_hash, 12), 'hex');
    v_id     idem.identity;
    v_found  boolean;
    v_stale  boolean;
BEGIN
    -- A replay (the identity is there, same payload) is answered by reads
    -- alone: no row lock, no transaction id, no commit flush.
    SELECT * INTO v_id FROM idem.identity i
    WHERE i.tenant_id = p_tenant_id AND i.operation_id = p_operation_id;
    FOR attempt IN 1..3 LOOP
        IF v_id.tenant_id IS NULL THEN
            INSERT INTO idem.identity (tenant_id, operation_id, op_class, payload_digest)
            VALUES (p_tenant_id, p_operation_id, p_op_class, v_digest)
            ON CONFLICT (tenant_id, operation_id) DO NOTHING;
            IF FOUND THEN
                IF p_with_body THEN
                    PERFORM p_payload::jsonb; -- the body holds JSON text, whoever runs the effect
                    INSERT INTO idem.inbox_body (tenant_id, operation_id, created_at, op_class, payload, transport)
                    VALUES (p_tenant_id, p_operation_id, now(), p_op_class, p_payload, p_transport);
                END IF;
                outcome := 'claimed';
                RETURN;
            END IF;
            -- Committed by another transaction meanwhile (READ COMMITTED
            -- waited for its writer; REPEATABLE READ raised 40001 instead).
            SELECT * INTO v_id FROM idem.identity i
            WHERE i.tenant_id = p_tenant_id AND i.operation_id = p_operation_id;
            IF v_id.tenant_id IS NULL THEN
                CONTINUE; -- gone again (a dropped tombstone): settle again
            END IF;
        END IF;
        IF v_id.payload_digest <> v_digest OR v_id.op_class <> p_op_class THEN
            -- record_conflict locks what it keeps as evidence. The keys
            -- with which an import or a record of an outcome known from
            -- outside says where its incoming side came from are written
            -- by those runs alone: a caller's transport (tracing metadata,
            -- any service's) never carries them into a record, or a
            -- client's retry would be shown imported and refused
            -- accept-as-new (idem.quarantine_import_refusal).
            quarantine_id := idem.record_conflict(v_id, p_op_class, p_payload, p_payload_hash,
                                                  p_transport - ARRAY['entered_by', 'entry_plan', 'planned_person',
                                                                      'approved_person', 'run_by', 'old_store_response',
                                                                      'evidence']);
            IF quarantine_id IS NULL THEN
                v_id := NULL; -- a dropped tombstone: settle again
                CONTINUE;
            END IF;
            outcome := 'conflict';
            RETURN;
        END IF;
        -- The body and, in the same snapshot, whether that snapshot predates
        -- the last purge swap (which it could not see through), read from
        -- its partition alone (idem.rebuild_inbox_body_read).
        FOR reread IN 1..3 LOOP
            SELECT r.response, r.present, r.stale INTO response, v_found, v_stale
            FROM idem.inbox_body_read(p_tenant_id, p_operation_id, v_id.created_at) AS r;
            EXIT WHEN NOT v_stale;
            IF current_setting('transaction_isolation') <> 'read committed' THEN
                RAISE EXCEPTION 'identity (%, %): this transaction''s snapshot predates a purge of its day and cannot see its body; retry the transaction', p_tenant_id, p_operation_id
                    USING ERRCODE = '40001';
            END IF;
            -- READ COMMITTED: the next statement takes a new snapshot.
        END LOOP;
        IF v_found THEN
            IF response IS NULL THEN
                RAISE EXCEPTION 'identity (%, %) was claimed in this transaction and is not completed yet', p_tenant_id, p_operation_id
                    USING ERRCODE = 'IX014', HINT = 'call idem.complete once, after the effect';
            END IF;
            outcome := 'already_applied';
            RETURN;
        END IF;
        -- No body: a tombstone, but only if a purge covers it. Anything else
        -- is damage, refused rather than run again.
        IF NOT EXISTS (SELECT 1 FROM idem.horizon_plan p
                       WHERE p.op_class = v_id.op_class AND p.action = 'purge'
                         AND p.purge_started_at IS NOT NULL AND v_id.created_at < p.cutoff) THEN
            RAISE EXCEPTION 'identity (%, %) has no stored payload and no purge covers it', p_tenant_id, p_operation_id
                USING ERRCODE = 'IX305',
                      HINT = 'its inbox body was removed outside idemctl horizon; nothing was run';
        END IF;
        outcome := 'purged';
        RETURN;
    END LOOP;
    RAISE EXCEPTION 'identity (%, %) could not be settled; retry', p_tenant_id, p_operation_id
        USING ERRCODE = 'IX007';
END
$$;
