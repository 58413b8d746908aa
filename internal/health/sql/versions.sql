-- The schema version and the code package version the database holds.
SELECT coalesce((SELECT max(version) FROM idem.schema_migrations), 0),
       coalesce((SELECT version FROM idem.code_package), 0)
