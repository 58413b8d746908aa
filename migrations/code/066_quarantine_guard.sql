-- object: function idem.quarantine_guard()
-- quarantine_guard checks the two things that may change on a record: its
-- counters only move forward, and its decision is taken once, from open to
-- rejected or accepted (IX103). Who may decide, and that a decision has its
-- audit row, is settled by the only functions allowed to write the table.
CREATE OR REPLACE FUNCTION idem.quarantine_guard()
RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
BEGIN
    IF NEW.occurrences < OLD.occurrences OR NEW.last_seen < OLD.last_seen THEN
        RAISE EXCEPTION 'quarantine record %: occurrences and last_seen only move forward', OLD.id
            USING ERRCODE = 'IX102';
    END IF;
    IF NEW.status IS DISTINCT FROM OLD.status AND (OLD.status <> 'open' OR NEW.status NOT IN ('rejected', 'accepted')) THEN
        RAISE EXCEPTION 'quarantine record %: a decision moves open to rejected or accepted, once (was %, asked %)',
                OLD.id, OLD.status, NEW.status
            USING ERRCODE = 'IX103';
    END IF;
    IF NEW.status = OLD.status AND OLD.status <> 'open'
       AND (NEW.decided_at, NEW.decided_by, NEW.decided_person, NEW.decided_db_user, NEW.decision_reason,
            NEW.new_operation_id, NEW.new_outcome, NEW.decision_audit_id)
           IS DISTINCT FROM
           (OLD.decided_at, OLD.decided_by, OLD.decided_person, OLD.decided_db_user, OLD.decision_reason,
            OLD.new_operation_id, OLD.new_outcome, OLD.decision_audit_id) THEN
        RAISE EXCEPTION 'quarantine record %: a decision is final', OLD.id USING ERRCODE = 'IX103';
    END IF;
    RETURN NEW;
END
$$;
