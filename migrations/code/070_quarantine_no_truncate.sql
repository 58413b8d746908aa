-- object: trigger quarantine_no_truncate on idem.quarantine
CREATE OR REPLACE TRIGGER quarantine_no_truncate
    BEFORE TRUNCATE ON idem.quarantine
    FOR EACH STATEMENT EXECUTE FUNCTION idem.quarantine_refuse();
