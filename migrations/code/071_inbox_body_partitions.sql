-- object: function idem.inbox_body_partitions()
-- grant: operator, auditor
-- inbox_body_partitions lists the body's partitions with their bounds (lower
-- NULL for MINVALUE, upper NULL for MAXVALUE), the default one flagged.
CREATE OR REPLACE FUNCTION idem.inbox_body_partitions()
RETURNS TABLE (part regclass, lower_bound timestamptz, upper_bound timestamptz, is_default boolean)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
    SELECT c.oid::regclass,
           CASE WHEN b.expr ~ 'FROM \(MINVALUE\)' THEN NULL
                ELSE substring(b.expr FROM $re$FROM \('([^']*)'\)$re$)::timestamptz END,
           CASE WHEN b.expr ~ 'TO \(MAXVALUE\)' THEN NULL
                ELSE substring(b.expr FROM $re$TO \('([^']*)'\)$re$)::timestamptz END,
           b.expr = 'DEFAULT'
    FROM pg_inherits h
    JOIN pg_class c ON c.oid = h.inhrelid
    CROSS JOIN LATERAL (SELECT pg_get_expr(c.relpartbound, c.oid) AS expr) b
    WHERE h.inhparent = 'idem.inbox_body'::regclass
$$;
