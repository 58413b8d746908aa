-- object: function idem.qualified_names(regclass[])
-- qualified_names spells each table schema-qualified, whatever the
-- search_path, in the given order (NULL for NULL).
CREATE OR REPLACE FUNCTION idem.qualified_names(p_tables regclass[])
RETURNS text[]
LANGUAGE sql STABLE
AS $$
    SELECT CASE WHEN p_tables IS NOT NULL THEN coalesce(
        (SELECT array_agg(format('%I.%I', n.nspname, c.relname) ORDER BY u.i)
         FROM unnest(p_tables) WITH ORDINALITY AS u (t, i)
         JOIN pg_catalog.pg_class c ON c.oid = u.t
         JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace), '{}') END
$$;
