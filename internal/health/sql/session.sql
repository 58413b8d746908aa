-- Where a session stands: the server, the login, primary or not, and whether
-- this login may read schema idem's history (a service login may not).
SELECT current_setting('server_version'), current_user::text,
       (SELECT rolsuper FROM pg_roles WHERE rolname = current_user),
       pg_is_in_recovery(), current_setting('transaction_read_only') = 'on',
       to_regclass('idem.schema_migrations') IS NOT NULL,
       coalesce(has_table_privilege(to_regclass('idem.schema_migrations'), 'SELECT'), false)
       AND coalesce(has_table_privilege(to_regclass('idem.code_package'), 'SELECT'), false)
