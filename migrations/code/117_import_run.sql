-- object: function idem.import_run(bigint, text)
-- import_run enters the items of an approved import plan, in the caller's
-- transaction (idem.entry_plan_run), set by set, 50000 items a step: the
-- body partitions of their real ages first (idem.inbox_body_ensure: months
-- long past whole, recent days each), then every identity the inbox does
-- not hold yet, with its ORIGINAL created_at (identity and body), its
-- payload and response, marked with the plan; the effect is not run. An
-- item whose identity has a pending claim or an open quarantine record is
-- refused. An identity the inbox already holds (before, or written by a
-- concurrent caller meanwhile: the unique key settles it) is left alone:
-- skipped when it holds the same payload hash and class, quarantined with
-- both sides (idem.record_conflict) otherwise; nothing is overwritten. An
-- item of a hash-only store enters with the store's hash as its digest when
-- the hash function was declared (a request whose payload bytes hash to it
-- is the same request), else with a digest no payload text can have, and is
-- listed in idem.imported_hash: a retry that does not match is a conflict
-- "imported without its payload". Only the items not entered get an
-- outcome written (refused, skipped, quarantined): an entered item of an
-- import keeps outcome NULL, so that a million rows are not written twice.
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
    v_max   integer;
    v_lo    integer := 1;
    v_step  constant integer := 50000;
    v_i     idem.entry_item;
    v_n     bigint;
    v_done  bigint := 0;
    v_id    idem.identity;
    v_trans jsonb;
BEGIN
    -- The plan by its id (a row type as an argument made the function one
    -- that Citus's migrate could not grant on the coordinator).
    SELECT * INTO STRICT p_p FROM idem.entry_plan WHERE id = p_id;
    v_trans := jsonb_build_object('entered_by', 'import', 'entry_plan', p_p.id, 'planned_person', p_p.planned_person,
                                  'approved_person', p_p.approved_person);
    SELECT (min(created_at) AT TIME ZONE 'UTC')::date, (max(created_at) AT TIME ZONE 'UTC')::date, max(seq)
    INTO v_from, v_to, v_max
    FROM idem.entry_item WHERE plan_id = p_p.id;
    WHILE v_from <= v_to LOOP
        PERFORM idem.inbox_body_ensure(v_from, least(v_from + 399, v_to));
        v_from := v_from + 400;
    END LOOP;
    UPDATE idem.entry_item e SET outcome = 'refused'
    WHERE e.plan_id = p_p.id
      AND (EXISTS (SELECT 1 FROM idem.pending_claim c WHERE c.tenant_id = e.tenant_id AND c.operation_id = e.operation_id)
           OR EXISTS (SELECT 1 FROM idem.quarantine q WHERE q.tenant_id = e.tenant_id AND q.operation_id = e.operation_id
                      AND q.status = 'open'));
    WHILE v_lo <= v_max LOOP
        WITH ins AS (
            INSERT INTO idem.identity (tenant_id, operation_id, op_class, payload_digest, created_at, entry_plan)
            SELECT e.tenant_id, e.operation_id, e.op_class,
                   CASE WHEN e.payload IS NOT NULL THEN decode(substr(e.payload_hash, 12), 'hex')
                        WHEN e.hash_function IS NOT NULL THEN e.store_hash
                        -- a NUL byte: no payload text hashes to this
                        ELSE sha256(e.store_hash || '\x00'::bytea || convert_to('imported without its payload', 'UTF8')) END,
                   e.created_at, p_p.id
            FROM idem.entry_item e
            WHERE e.plan_id = p_p.id AND e.seq BETWEEN v_lo AND v_lo + v_step - 1 AND e.outcome IS NULL
            ORDER BY e.seq
            ON CONFLICT (tenant_id, operation_id) DO NOTHING
            RETURNING identity.tenant_id, identity.operation_id
        )
        INSERT INTO idem.inbox_body (tenant_id, operation_id, created_at, op_class, payload, response, transport)
        SELECT e.tenant_id, e.operation_id, e.created_at, e.op_class, coalesce(e.payload, 'null'), e.response,
               CASE WHEN e.payload IS NULL THEN v_trans || jsonb_build_object('imported_without_payload', true,
                        'store_hash', encode(e.store_hash, 'hex'), 'hash_function', e.hash_function)
                    ELSE v_trans END
        FROM ins JOIN idem.entry_item e
          ON e.plan_id = p_p.id AND e.tenant_id = ins.tenant_id AND e.operation_id = ins.operation_id;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        v_done := v_done + v_n;
        v_lo := v_lo + v_step;
    END LOOP;
    INSERT INTO idem.imported_hash (tenant_id, operation_id, store_hash, hash_function, entry_plan)
    SELECT e.tenant_id, e.operation_id, e.store_hash, e.hash_function, p_p.id
    FROM idem.entry_item e JOIN idem.identity i ON i.tenant_id = e.tenant_id AND i.operation_id = e.operation_id
    WHERE e.plan_id = p_p.id AND e.store_hash IS NOT NULL AND e.outcome IS NULL AND i.entry_plan = p_p.id;
    -- What the inbox held already: the same request is skipped, another
    -- one quarantined with both sides (nothing to look for when every item
    -- not refused entered).
    IF v_done = (SELECT count(*) FROM idem.entry_item e WHERE e.plan_id = p_p.id AND e.outcome IS NULL) THEN
        RETURN;
    END IF;
    FOR v_i IN SELECT e.* FROM idem.entry_item e JOIN idem.identity i
                   ON i.tenant_id = e.tenant_id AND i.operation_id = e.operation_id
               WHERE e.plan_id = p_p.id AND e.outcome IS NULL AND i.entry_plan IS DISTINCT FROM p_p.id
               ORDER BY e.seq LOOP
        SELECT * INTO v_id FROM idem.identity i WHERE i.tenant_id = v_i.tenant_id AND i.operation_id = v_i.operation_id;
        IF v_id.op_class = v_i.op_class
           AND v_id.payload_digest = coalesce(decode(substr(v_i.payload_hash, 12), 'hex'), v_i.store_hash) THEN
            UPDATE idem.entry_item SET outcome = 'skipped' WHERE plan_id = p_p.id AND seq = v_i.seq;
        ELSIF v_i.payload IS NOT NULL
              AND idem.record_conflict(v_id, v_i.op_class, v_i.payload, v_i.payload_hash,
                                       v_trans || jsonb_build_object('evidence', v_i.evidence, 'run_by', p_operator)) IS NOT NULL THEN
            UPDATE idem.entry_item SET outcome = 'quarantined' WHERE plan_id = p_p.id AND seq = v_i.seq;
        ELSE
            -- a hash-only item cannot be shown as a conflict's incoming side
            UPDATE idem.entry_item SET outcome = 'refused' WHERE plan_id = p_p.id AND seq = v_i.seq;
        END IF;
    END LOOP;
END
$$;
