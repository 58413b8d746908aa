-- object: function idem.quarantine_reject(bigint, text, text)
-- grant: operator
-- quarantine_reject decides that the conflicting request must never run: the
-- record stays (and keeps holding the stored side's evidence), replays of that
-- payload keep being refused and counted. The decision and its audit row are
-- written here, in the caller's transaction. Returns the audit row id.
CREATE OR REPLACE FUNCTION idem.quarantine_reject(p_id bigint, p_operator text, p_reason text)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_problem text := idem.decision_input_problem(p_operator, p_reason);
    v_q       idem.quarantine;
    v_audit   idem.audit;
BEGIN
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'reject quarantine record %: %', coalesce(p_id::text, 'NULL'), v_problem
            USING ERRCODE = 'IX104', HINT = 'pass --reason and --operator (or set IDEMCTL_OPERATOR)';
    END IF;
    v_q := idem.quarantine_lock_open(p_id);
    v_audit := idem.audit_write(p_operator, 'quarantine.reject', 'quarantine:' || v_q.id, jsonb_build_object(
        'quarantine_id', v_q.id, 'tenant_id', v_q.tenant_id, 'operation_id', v_q.operation_id,
        'class', v_q.op_class, 'stored_hash', v_q.stored_hash, 'incoming_hash', v_q.incoming_hash,
        'occurrences', v_q.occurrences, 'reason', p_reason)::text);
    UPDATE idem.quarantine
    SET status = 'rejected', decided_at = now(), decided_by = p_operator, decided_person = nullif(v_audit.person, ''),
        decided_db_user = session_user, decision_reason = p_reason, decision_audit_id = v_audit.id
    WHERE tenant_id = v_q.tenant_id AND id = v_q.id;
    RETURN v_audit.id;
END
$$;
