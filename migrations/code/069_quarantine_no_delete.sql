-- object: trigger quarantine_no_delete on idem.quarantine
CREATE OR REPLACE TRIGGER quarantine_no_delete
    BEFORE DELETE ON idem.quarantine
    FOR EACH ROW EXECUTE FUNCTION idem.quarantine_refuse();
