-- object: function idem.quarantine_reject_record(idem.quarantine, text, text, jsonb)
-- quarantine_reject_record writes the decision "never run this" on a record
-- its caller locked open (idem.quarantine_lock_open, or the row lock of
-- idem.quarantine_reject_batch): the audit row, then the decision pointing at
-- it. p_extra is merged into the audit row's details (a bulk run's label).
-- Internal: granted to nobody, called by quarantine_reject and
-- quarantine_reject_batch only. Returns the audit row id.
CREATE OR REPLACE FUNCTION idem.quarantine_reject_record(p_q idem.quarantine, p_operator text, p_reason text, p_extra jsonb)
RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
    v_audit idem.audit;
BEGIN
    v_audit := idem.audit_write(p_operator, 'quarantine.reject', 'quarantine:' || p_q.id, (jsonb_build_object(
        'quarantine_id', p_q.id, 'tenant_id', p_q.tenant_id, 'operation_id', p_q.operation_id,
        'class', p_q.op_class, 'stored_hash', p_q.stored_hash, 'incoming_hash', p_q.incoming_hash,
        'occurrences', p_q.occurrences, 'reason', p_reason) || coalesce(p_extra, '{}'::jsonb))::text);
    UPDATE idem.quarantine
    SET status = 'rejected', decided_at = now(), decided_by = p_operator, decided_person = nullif(v_audit.person, ''),
        decided_db_user = session_user, decision_reason = p_reason, decision_audit_id = v_audit.id
    WHERE tenant_id = p_q.tenant_id AND id = p_q.id;
    RETURN v_audit.id;
END
$$;
