-- object: function idem.audit_refuse()
-- audit_refuse is the trigger that keeps idem.audit append-only and its head
-- in place, even for the schema owner's own scripts: UPDATE and DELETE of a
-- row, TRUNCATE, and DELETE or TRUNCATE of the head are refused. (Nobody but
-- the owner may write these tables at all; a superuser can still disable
-- triggers, which is what audit verify and its anchors are for.)
CREATE OR REPLACE FUNCTION idem.audit_refuse()
RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
BEGIN
    IF TG_TABLE_NAME = 'audit_head' THEN
        RAISE EXCEPTION 'idem.audit_head moves only when a row is appended to idem.audit (% refused)', TG_OP
            USING ERRCODE = 'IX112';
    END IF;
    RAISE EXCEPTION 'idem.audit is append-only (% refused)', TG_OP
        USING ERRCODE = 'IX110';
END
$$;
