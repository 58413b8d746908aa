-- object: function idem.quarantine_accept_record(idem.quarantine, text, text, text, jsonb)
-- quarantine_accept_record runs the incoming payload of a record its caller
-- locked open under (tenant_id, p_new_operation_id) through idem.execute and
-- writes the decision and its audit row (p_extra merged into its details),
-- in the caller's transaction:
--   applied          the new operation ran now;
--   already_applied  the new identity already held this very payload: linked, not re-run;
--   NEW holds another payload: refused (IX106), and the caller's whole
--   transaction rolls back: no decision, no audit row, nothing run.
-- A record an import brought is refused (IX128, idem.quarantine_import_refusal).
-- Internal: granted to nobody, called by quarantine_accept_as_new and
-- quarantine_bulk_accept_run only.
CREATE OR REPLACE FUNCTION idem.quarantine_accept_record(
    p_q idem.quarantine, p_new_operation_id text, p_operator text, p_reason text, p_extra jsonb,
    OUT outcome text, OUT response jsonb, OUT audit_id bigint)
LANGUAGE plpgsql
AS $$
#variable_conflict use_column
DECLARE
    v_problem  text := idem.identity_problem(p_q.tenant_id, p_new_operation_id);
    v_outcome  text;
    v_response jsonb;
    v_audit    idem.audit;
    v_refusal  text := idem.quarantine_import_refusal(p_q.incoming_transport);
BEGIN
    IF v_refusal IS NOT NULL THEN
        RAISE EXCEPTION 'quarantine record %: %', p_q.id, v_refusal
            USING ERRCODE = 'IX128',
                  HINT = format('reject it (idemctl quarantine reject %s --reason TEXT); if it really is a new operation, record it by hand (idemctl record plan)', p_q.id);
    END IF;
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'invalid new operation id: %', v_problem
            USING ERRCODE = 'IX105', HINT = 'operation_id: 1-256 bytes without control characters';
    END IF;
    IF p_new_operation_id = p_q.operation_id THEN
        RAISE EXCEPTION 'the new operation id must differ from the conflicting one (%)', quote_literal(p_q.operation_id)
            USING ERRCODE = 'IX105',
                  HINT = 'a revision is a new operation with its own identity, e.g. <operation_id>-rev2';
    END IF;
    SELECT e.outcome, e.response INTO v_outcome, v_response
    FROM idem.execute(p_q.tenant_id, p_new_operation_id, p_q.incoming_class, p_q.incoming_payload, p_q.incoming_hash,
                      jsonb_build_object('accepted_from_quarantine', p_q.id, 'original_operation_id', p_q.operation_id,
                                         'accepted_by', p_operator)
                      || CASE WHEN p_q.incoming_transport IS NULL THEN '{}'::jsonb
                              ELSE jsonb_build_object('incoming_transport', p_q.incoming_transport) END) e;
    IF v_outcome = 'purged' THEN
        v_outcome := 'already_applied'; -- it ran under that identity before, and was purged since
    END IF;
    IF v_outcome NOT IN ('applied', 'already_applied') THEN
        RAISE EXCEPTION 'operation (%, %) already exists with another payload', quote_literal(p_q.tenant_id),
                quote_literal(p_new_operation_id)
            USING ERRCODE = 'IX106',
                  DETAIL = format('the incoming payload of quarantine record %s has hash %s; the new identity answered %s',
                                  p_q.id, p_q.incoming_hash, v_outcome),
                  HINT = 'choose an unused new operation id; nothing was executed or recorded';
    END IF;
    PERFORM idem.quarantine_release(p_q);
    v_audit := idem.audit_write(p_operator, 'quarantine.accept_as_new', 'quarantine:' || p_q.id, (jsonb_build_object(
        'quarantine_id', p_q.id, 'tenant_id', p_q.tenant_id, 'operation_id', p_q.operation_id,
        'new_operation_id', p_new_operation_id, 'class', p_q.incoming_class,
        'stored_hash', p_q.stored_hash, 'incoming_hash', p_q.incoming_hash,
        'occurrences', p_q.occurrences, 'outcome', v_outcome, 'reason', p_reason) || coalesce(p_extra, '{}'::jsonb))::text);
    UPDATE idem.quarantine q
    SET status = 'accepted', decided_at = now(), decided_by = p_operator, decided_person = nullif(v_audit.person, ''),
        decided_db_user = session_user, decision_reason = p_reason, new_operation_id = p_new_operation_id,
        new_outcome = v_outcome, decision_audit_id = v_audit.id
    WHERE q.tenant_id = p_q.tenant_id AND q.id = p_q.id;
    outcome := v_outcome;
    response := v_response;
    audit_id := v_audit.id;
END
$$;
