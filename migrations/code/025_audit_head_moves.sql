-- object: function idem.audit_head_moves()
-- audit_head_moves is the trigger that lets idem.audit_head move only the way
-- idem.audit_write moves it, even for the schema owner's own scripts: one
-- row forward, onto the row just appended to idem.audit, whose prev_hash is
-- the head's last hash. A head moved back, skipped ahead or pointed at a
-- rewritten row is refused (IX112). (A superuser can still disable
-- triggers, which is what audit verify and its kept anchor are for.)
CREATE OR REPLACE FUNCTION idem.audit_head_moves()
RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
BEGIN
    IF NEW.singleton IS DISTINCT FROM OLD.singleton OR NEW.last_id IS DISTINCT FROM OLD.last_id + 1
       OR NOT EXISTS (SELECT 1 FROM idem.audit a
                      WHERE a.id = NEW.last_id AND a.hash = NEW.last_hash AND a.prev_hash = OLD.last_hash) THEN
        RAISE EXCEPTION 'idem.audit_head moves only onto the row just appended to idem.audit (from row % to row % refused)',
                OLD.last_id, NEW.last_id
            USING ERRCODE = 'IX112';
    END IF;
    RETURN NEW;
END
$$;
