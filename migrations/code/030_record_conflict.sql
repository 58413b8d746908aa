-- object: function idem.record_conflict(idem.identity, text, text, text, jsonb)
-- record_conflict keeps the evidence of a request that reused identity p_id
-- with another payload or class, and returns the record's id (NULL when the
-- identity vanished meanwhile, a dropped tombstone: the caller settles again).
-- A repeat of a known conflict only counts (occurrences, last_seen). A new
-- record holds the stored side so that no purge removes its evidence: it
-- locks the body row (a purge deleting it waits for this transaction), and
-- once the record is inserted, counts itself in the body's holds, which the
-- purge re-checks on the row it deletes. Purged already: it holds the
-- tombstone (identity.holds) instead, and says in the diff which plan purged
-- the stored side. Concurrent first occurrences make one record; only the
-- inserter counts its hold. An identity imported from a store that kept
-- only its own request hash (idem.imported_hash) has no stored payload: the
-- record keeps the stored response, no stored payload, and says "imported
-- without its payload" and why this request does not match.
CREATE OR REPLACE FUNCTION idem.record_conflict(
    p_id idem.identity, p_op_class text, p_payload text, p_payload_hash text, p_transport jsonb
) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_qid      bigint;
    v_payload  text;
    v_response jsonb;
    v_holds_on text := 'body';
    v_diff     jsonb;
    v_plan     idem.horizon_plan;
    v_inserted boolean;
    v_imported idem.imported_hash;
    v_body     boolean;
    -- now() as a value: Citus refuses a function call in ON CONFLICT DO
    -- UPDATE SET on a distributed table (it must be IMMUTABLE there).
    v_now      timestamptz := now();
BEGIN
    UPDATE idem.quarantine q
    SET occurrences = q.occurrences + 1, last_seen = greatest(q.last_seen, v_now)
    WHERE q.tenant_id = p_id.tenant_id AND q.operation_id = p_id.operation_id
      AND q.incoming_hash = p_payload_hash AND q.incoming_class = p_op_class
    RETURNING q.id INTO v_qid;
    IF FOUND THEN
        RETURN v_qid;
    END IF;
    SELECT b.payload, b.response INTO v_payload, v_response
    FROM idem.inbox_body b
    WHERE b.tenant_id = p_id.tenant_id AND b.operation_id = p_id.operation_id AND b.created_at = p_id.created_at
    FOR NO KEY UPDATE;
    v_body := FOUND;
    SELECT * INTO v_imported FROM idem.imported_hash h
    WHERE h.tenant_id = p_id.tenant_id AND h.operation_id = p_id.operation_id;
    IF v_imported.tenant_id IS NOT NULL AND v_body THEN
        v_payload := NULL;
        v_diff := jsonb_build_array(jsonb_build_object(
            'path', '', 'change', 'imported_without_payload', 'stored', NULL, 'incoming', p_payload::jsonb,
            'entry_plan', v_imported.entry_plan, 'store_hash', encode(v_imported.store_hash, 'hex'),
            'hash_function', v_imported.hash_function,
            'note', CASE WHEN v_imported.hash_function IS NULL
                THEN 'imported without its payload: the old store kept only its own request hash and the import declared no hash function, so no retry can be matched to it; nothing ran'
                ELSE format('imported without its payload: the old store kept only its own request hash (%s) and this request does not hash to it; nothing ran',
                            v_imported.hash_function) END));
    ELSIF v_body THEN
        v_diff := idem.json_diff(v_payload::jsonb, p_payload::jsonb);
    ELSE
        PERFORM 1 FROM idem.identity i
        WHERE i.tenant_id = p_id.tenant_id AND i.operation_id = p_id.operation_id
        FOR NO KEY UPDATE;
        IF NOT FOUND THEN
            RETURN NULL;
        END IF;
        v_holds_on := 'identity';
        v_plan := idem.purged_by(p_id.tenant_id, p_id.operation_id, p_id.op_class, p_id.created_at);
        v_diff := jsonb_build_array(jsonb_build_object(
            'path', '', 'change', 'stored_purged', 'stored', NULL, 'incoming', p_payload::jsonb,
            'purge_plan', v_plan.id, 'purged_at', v_plan.purge_started_at,
            'note', 'the stored payload and response were purged under a proven replay horizon; only the stored hash and class remain'));
    END IF;
    INSERT INTO idem.quarantine AS q (
        tenant_id, operation_id, incoming_hash, incoming_class, op_class,
        stored_hash, stored_payload, stored_response, incoming_payload, incoming_transport,
        diff, holds_on, detected_app, detected_user, detected_operator
    ) VALUES (
        p_id.tenant_id, p_id.operation_id, p_payload_hash, p_op_class, p_id.op_class,
        'jcs-sha256:' || encode(p_id.payload_digest, 'hex'), v_payload, v_response, p_payload, p_transport,
        v_diff, v_holds_on, left(current_setting('application_name', true), 64), session_user,
        nullif(left(regexp_replace(current_setting('idem.operator', true), '[\x01-\x1f\x7f-\x9f]', '?', 'g'), 256), '')
    )
    ON CONFLICT (tenant_id, operation_id, incoming_hash, incoming_class) DO UPDATE
        SET occurrences = q.occurrences + 1, last_seen = greatest(q.last_seen, v_now)
    RETURNING q.id, q.xmax = 0 INTO v_qid, v_inserted;
    IF v_inserted AND v_holds_on = 'body' THEN
        UPDATE idem.inbox_body b SET holds = b.holds + 1
        WHERE b.tenant_id = p_id.tenant_id AND b.operation_id = p_id.operation_id AND b.created_at = p_id.created_at;
    ELSIF v_inserted THEN
        UPDATE idem.identity i SET holds = i.holds + 1
        WHERE i.tenant_id = p_id.tenant_id AND i.operation_id = p_id.operation_id;
    END IF;
    RETURN v_qid;
END
$$;
