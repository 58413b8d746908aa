-- object: trigger audit_append_only_truncate on idem.audit
CREATE OR REPLACE TRIGGER audit_append_only_truncate BEFORE TRUNCATE ON idem.audit
    FOR EACH STATEMENT EXECUTE FUNCTION idem.audit_refuse();
