-- Where a session stands: the server, the login, primary or not, whether
-- schema idem holds its history, and whether this login may read it (a
-- service login may not). The catalogs are read directly: to_regclass would
-- fail for a login without USAGE on the schema.
WITH history AS (
    SELECT c.oid, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = 'idem' AND c.relname IN ('schema_migrations', 'code_package')
)
SELECT current_setting('server_version'), current_user::text,
       (SELECT rolsuper FROM pg_roles WHERE rolname = current_user),
       pg_is_in_recovery(), current_setting('transaction_read_only') = 'on',
       EXISTS (SELECT 1 FROM history WHERE relname = 'schema_migrations'),
       count(*) = 2 AND bool_and(has_table_privilege(oid, 'SELECT'))
           AND has_schema_privilege((SELECT oid FROM pg_namespace WHERE nspname = 'idem'), 'USAGE')
FROM history
