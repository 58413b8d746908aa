-- object: trigger audit_head_guard_truncate on idem.audit_head
CREATE OR REPLACE TRIGGER audit_head_guard_truncate BEFORE TRUNCATE ON idem.audit_head
    FOR EACH STATEMENT EXECUTE FUNCTION idem.audit_refuse();
