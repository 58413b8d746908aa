-- object: function idem.quarantine_provider_answer(text, text, text, text, text, jsonb, text)
-- grant: operator
-- quarantine_provider_answer records a conflict whose other side is at the
-- provider: a re-drive answered 422 ("key used with another payload") while
-- the inbox holds no identity. The record keeps the payload sent (canonical
-- text and hash, checked as idem.execute checks a request) and, as its stored
-- side, the provider's answer p_answer: {"status": 4xx, "body": text, "via",
-- "target"}; it has no stored hash and holds on nothing (holds_on
-- 'provider'). It is decided like any record (reject, accept-as-new, where a
-- money class still needs a second person). Refused (IX127) when the inbox
-- holds the identity (the protocol records that conflict itself: settle) or
-- the answer is not a 4xx with its body. A repeat of the same answer to the
-- same payload only counts (occurrences, last_seen). The login must be an
-- operator's; services cannot write it, so an app login cannot forge a
-- conflict. Audited (quarantine.provider_answer). Returns the record's id.
CREATE OR REPLACE FUNCTION idem.quarantine_provider_answer(
    p_tenant_id text, p_operation_id text, p_op_class text, p_payload text, p_payload_hash text, p_answer jsonb,
    p_operator text
) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_problem  text := idem.text_problem('operator', p_operator, 256);
    v_answer   jsonb;
    v_qid      bigint;
    v_inserted boolean;
    v_now      timestamptz := now();
BEGIN
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'provider answer: %', v_problem USING ERRCODE = 'IX104', HINT = 'pass --operator';
    END IF;
    PERFORM idem.check_request(p_tenant_id, p_operation_id, p_op_class, p_payload, p_payload_hash, NULL);
    IF p_answer IS NULL OR jsonb_typeof(p_answer -> 'status') IS DISTINCT FROM 'number'
       OR (p_answer ->> 'status')::numeric NOT BETWEEN 400 AND 499 OR (p_answer ->> 'status')::numeric % 1 <> 0
       OR jsonb_typeof(p_answer -> 'body') IS DISTINCT FROM 'string'
       OR octet_length(p_answer ->> 'body') > 65536 OR octet_length(p_answer::text) > 70000 THEN
        RAISE EXCEPTION 'provider answer for %/%: want {"status": 4xx, "body": text (at most 64 KiB)}, got %',
                p_tenant_id, p_operation_id, left(coalesce(p_answer::text, 'NULL'), 200)
            USING ERRCODE = 'IX127';
    END IF;
    v_answer := jsonb_build_object('status', (p_answer ->> 'status')::integer, 'body', p_answer ->> 'body',
                                   'via', p_answer -> 'via', 'target', p_answer -> 'target');
    -- The identity row is locked (or its absence seen) before the record is
    -- written: an identity that exists is the protocol's conflict, not this.
    PERFORM 1 FROM idem.identity i
    WHERE i.tenant_id = p_tenant_id AND i.operation_id = p_operation_id
    FOR KEY SHARE;
    IF FOUND THEN
        RAISE EXCEPTION 'provider answer for %/%: the inbox holds this identity; resolve it again (the protocol records that conflict)',
                p_tenant_id, p_operation_id
            USING ERRCODE = 'IX127';
    END IF;
    INSERT INTO idem.quarantine AS q (
        tenant_id, operation_id, incoming_hash, incoming_class, op_class,
        stored_hash, stored_payload, stored_response, incoming_payload, incoming_transport,
        diff, holds_on, detected_app, detected_user, detected_operator
    ) VALUES (
        p_tenant_id, p_operation_id, p_payload_hash, p_op_class, p_op_class,
        NULL, NULL, v_answer, p_payload, NULL,
        jsonb_build_array(jsonb_build_object(
            'path', '', 'change', 'provider_answer', 'stored', NULL, 'incoming', p_payload::jsonb,
            'note', format('the provider answered %s: the key was used there with another payload; nothing here holds it',
                           v_answer ->> 'status'))),
        'provider', left(current_setting('application_name', true), 64), session_user,
        left(regexp_replace(p_operator, '[\x01-\x1f\x7f-\x9f]', '?', 'g'), 256)
    )
    ON CONFLICT (tenant_id, operation_id, incoming_hash, incoming_class) DO UPDATE
        SET occurrences = q.occurrences + 1, last_seen = greatest(q.last_seen, v_now)
    RETURNING q.id, q.xmax = 0 INTO v_qid, v_inserted;
    PERFORM idem.audit_write(p_operator, 'quarantine.provider_answer', 'quarantine:' || v_qid,
        jsonb_build_object('quarantine_id', v_qid, 'tenant_id', p_tenant_id, 'operation_id', p_operation_id,
                           'class', p_op_class, 'incoming_hash', p_payload_hash, 'answer', v_answer,
                           'new_record', v_inserted)::text);
    RETURN v_qid;
END
$$;
