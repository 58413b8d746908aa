-- object: trigger audit_head_guard on idem.audit_head
CREATE OR REPLACE TRIGGER audit_head_guard BEFORE DELETE ON idem.audit_head
    FOR EACH ROW EXECUTE FUNCTION idem.audit_refuse();
