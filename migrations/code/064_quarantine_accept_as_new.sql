-- object: function idem.quarantine_accept_as_new(bigint, text, text, text)
-- grant: operator
-- quarantine_accept_as_new decides that the incoming payload is a legitimate
-- new operation (a settlement revision, a corrected amount) and runs it,
-- through idem.execute, under (tenant_id, p_new_operation_id) with the
-- incoming class, canonical payload and hash, in the caller's transaction:
--   applied          the new operation ran now;
--   already_applied  the new identity already held this very payload: linked, not re-run;
--   NEW holds another payload: refused (IX106); because this raises, the
--   whole transaction rolls back: no decision, no audit row, nothing run.
-- The decision and its audit row are written here.
CREATE OR REPLACE FUNCTION idem.quarantine_accept_as_new(
    p_id bigint, p_new_operation_id text, p_operator text, p_reason text
) RETURNS TABLE (outcome text, response jsonb, audit_id bigint)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_problem  text := idem.decision_input_problem(p_operator, p_reason);
    v_q        idem.quarantine;
    v_outcome  text;
    v_response jsonb;
    v_audit    idem.audit;
BEGIN
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'accept quarantine record % as new: %', coalesce(p_id::text, 'NULL'), v_problem
            USING ERRCODE = 'IX104', HINT = 'pass --reason and --operator (or set IDEMCTL_OPERATOR)';
    END IF;
    v_q := idem.quarantine_lock_open(p_id);
    v_problem := idem.identity_problem(v_q.tenant_id, p_new_operation_id);
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'invalid new operation id: %', v_problem
            USING ERRCODE = 'IX105', HINT = 'operation_id: 1-256 bytes without control characters';
    END IF;
    IF p_new_operation_id = v_q.operation_id THEN
        RAISE EXCEPTION 'the new operation id must differ from the conflicting one (%)', quote_literal(v_q.operation_id)
            USING ERRCODE = 'IX105',
                  HINT = 'a revision is a new operation with its own identity, e.g. <operation_id>-rev2';
    END IF;
    SELECT e.outcome, e.response INTO v_outcome, v_response
    FROM idem.execute(v_q.tenant_id, p_new_operation_id, v_q.incoming_class, v_q.incoming_payload, v_q.incoming_hash,
                      jsonb_build_object('accepted_from_quarantine', v_q.id, 'original_operation_id', v_q.operation_id,
                                         'accepted_by', p_operator)
                      || CASE WHEN v_q.incoming_transport IS NULL THEN '{}'::jsonb
                              ELSE jsonb_build_object('incoming_transport', v_q.incoming_transport) END) e;
    IF v_outcome = 'purged' THEN
        v_outcome := 'already_applied'; -- it ran under that identity before, and was purged since
    END IF;
    IF v_outcome NOT IN ('applied', 'already_applied') THEN
        RAISE EXCEPTION 'operation (%, %) already exists with another payload', quote_literal(v_q.tenant_id),
                quote_literal(p_new_operation_id)
            USING ERRCODE = 'IX106',
                  DETAIL = format('the incoming payload of quarantine record %s has hash %s; the new identity answered %s',
                                  v_q.id, v_q.incoming_hash, v_outcome),
                  HINT = 'choose an unused --new-operation-id; nothing was executed or recorded';
    END IF;
    PERFORM idem.quarantine_release(v_q);
    v_audit := idem.audit_write(p_operator, 'quarantine.accept_as_new', 'quarantine:' || v_q.id, jsonb_build_object(
        'quarantine_id', v_q.id, 'tenant_id', v_q.tenant_id, 'operation_id', v_q.operation_id,
        'new_operation_id', p_new_operation_id, 'class', v_q.incoming_class,
        'stored_hash', v_q.stored_hash, 'incoming_hash', v_q.incoming_hash,
        'occurrences', v_q.occurrences, 'outcome', v_outcome, 'reason', p_reason)::text);
    UPDATE idem.quarantine q
    SET status = 'accepted', decided_at = now(), decided_by = p_operator, decided_person = nullif(v_audit.person, ''),
        decided_db_user = session_user, decision_reason = p_reason, new_operation_id = p_new_operation_id,
        new_outcome = v_outcome, decision_audit_id = v_audit.id
    WHERE q.tenant_id = v_q.tenant_id AND q.id = v_q.id;
    RETURN QUERY SELECT v_outcome, v_response, v_audit.id;
END
$$;
