-- object: function idem.quarantine_refuse()
-- quarantine_refuse keeps the evidence immutable, even for the schema owner's
-- own scripts: an UPDATE naming an evidence column (even to the same value),
-- a DELETE and a TRUNCATE are refused (IX102). It reads the row only, never
-- another table, so it runs the same on each shard of a distributed table.
CREATE OR REPLACE FUNCTION idem.quarantine_refuse()
RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'quarantine record % is evidence and cannot be deleted', OLD.id
            USING ERRCODE = 'IX102', HINT = 'decide it instead: idemctl quarantine reject or accept-as-new';
    END IF;
    IF TG_OP = 'TRUNCATE' THEN
        RAISE EXCEPTION 'idem.quarantine is evidence and cannot be truncated' USING ERRCODE = 'IX102';
    END IF;
    RAISE EXCEPTION 'quarantine record % evidence is immutable: refused UPDATE of its evidence', OLD.id
        USING ERRCODE = 'IX102';
END
$$;
