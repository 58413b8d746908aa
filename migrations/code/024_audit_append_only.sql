-- object: trigger audit_append_only on idem.audit
CREATE OR REPLACE TRIGGER audit_append_only BEFORE UPDATE OR DELETE ON idem.audit
    FOR EACH ROW EXECUTE FUNCTION idem.audit_refuse();
