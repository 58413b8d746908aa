-- object: function idem.citus_not_colocated(regclass[])
-- citus_not_colocated returns the first of p_tables that an effect run on the
-- node of its tenant's shard cannot use: neither distributed co-located with
-- idem.identity nor a reference table. NULL when all can (and off Citus).
CREATE OR REPLACE FUNCTION idem.citus_not_colocated(p_tables regclass[])
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    IF NOT idem.citus_distributed() THEN
        RETURN NULL;
    END IF;
    RETURN (SELECT t::text FROM unnest(p_tables) WITH ORDINALITY AS u (t, n)
            WHERE NOT EXISTS (
                SELECT 1 FROM pg_catalog.pg_dist_partition d
                WHERE d.logicalrelid = u.t
                  AND (d.repmodel = 't'
                       OR (d.partmethod = 'h' AND d.colocationid = (
                               SELECT a.colocationid FROM pg_catalog.pg_dist_partition a
                               WHERE a.logicalrelid = 'idem.identity'::regclass))))
            ORDER BY u.n LIMIT 1);
END
$$;
