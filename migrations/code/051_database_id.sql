-- object: function idem.database_id()
-- grant: app, operator, auditor
-- database_id names this database for a service's replies (the Idem-Database
-- header): the id migrate stamped once, a dash, and the first 8 hex digits
-- of the SHA-256 of the database's name. It says which database, not where:
-- no host, port or name is given away.
CREATE OR REPLACE FUNCTION idem.database_id()
RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
    SELECT d.id || '-' || left(encode(sha256(convert_to(current_database(), 'UTF8')), 'hex'), 8)
    FROM idem.database_identity d
$$;
