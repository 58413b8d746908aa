-- object: trigger audit_head_moves on idem.audit_head
CREATE OR REPLACE TRIGGER audit_head_moves BEFORE UPDATE ON idem.audit_head
    FOR EACH ROW EXECUTE FUNCTION idem.audit_head_moves();
