-- object: function idem.citus_distributed()
-- citus_distributed is true on a Citus coordinator whose idem tables are
-- distributed (idemctl migrate there), false on plain PostgreSQL. PL/pgSQL
-- plans a statement when it first runs it, so the Citus catalogue is read
-- only where it exists.
CREATE OR REPLACE FUNCTION idem.citus_distributed()
RETURNS boolean
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    IF to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
        RETURN false;
    END IF;
    RETURN EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition d WHERE d.logicalrelid = 'idem.identity'::regclass);
END
$$;
