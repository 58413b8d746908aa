-- object: trigger quarantine_evidence_guard on idem.quarantine
-- Fired only when an UPDATE names an evidence column, so that the repeat of a
-- conflict, which sets the counters only, never compares the payloads.
CREATE OR REPLACE TRIGGER quarantine_evidence_guard
    BEFORE UPDATE OF tenant_id, operation_id, incoming_hash, incoming_class, id, op_class, stored_hash,
        stored_payload, stored_response, incoming_payload, incoming_transport, diff, holds_on, detected_app,
        detected_user, detected_operator, first_seen
    ON idem.quarantine
    FOR EACH ROW EXECUTE FUNCTION idem.quarantine_refuse();
