-- object: trigger quarantine_guard on idem.quarantine
CREATE OR REPLACE TRIGGER quarantine_guard
    BEFORE UPDATE OF occurrences, last_seen, status, decided_at, decided_by, decided_person, decided_db_user,
        decision_reason, new_operation_id, new_outcome, decision_audit_id
    ON idem.quarantine
    FOR EACH ROW EXECUTE FUNCTION idem.quarantine_guard();
