-- object: function idem.redrive_reference_problem(text)
-- redrive_reference_problem says what is wrong with a header value that is a
-- credential reference, or NULL when it is valid or not a reference. A
-- reference is read by whoever runs resolve, so it may only name what such a
-- person sets aside: env:IDEMCTL_REDRIVE_<NAME>, or file:<PATH> relative to
-- the credential directory they configure, of plain names (no "..", no
-- hidden file, no absolute path). Go applies the same rules (package
-- redrive) and, at send time, the rest (symbolic links, file modes).
CREATE OR REPLACE FUNCTION idem.redrive_reference_problem(p_value text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
    SELECT CASE
               WHEN p_value LIKE 'env:%' AND p_value !~ '^env:IDEMCTL_REDRIVE_[A-Z0-9_]+$'
                   THEN 'only environment variables named IDEMCTL_REDRIVE_... may be referenced'
               WHEN p_value LIKE 'file:%' AND p_value !~ '^file:[A-Za-z0-9_][A-Za-z0-9_.-]*(/[A-Za-z0-9_][A-Za-z0-9_.-]*)*$'
                   THEN 'a file reference is a path relative to the credential directory, of plain names (no "..", no hidden or absolute path)'
           END
$$;
