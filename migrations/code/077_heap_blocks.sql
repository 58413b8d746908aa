-- object: function idem.heap_blocks(regclass)
-- grant: operator
-- heap_blocks is how many heap blocks a purge walks in p_rel (a partition of
-- idem.inbox_body, or idem.identity) by block ranges: its size in blocks on
-- plain PostgreSQL; on Citus, where the coordinator holds an empty shell and
-- each batch's block range is applied to every shard at once, the largest
-- shard's size (indexes included: an overestimate only adds empty ranges).
CREATE OR REPLACE FUNCTION idem.heap_blocks(p_rel regclass)
RETURNS bigint
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
BEGIN
    -- Nested: PL/pgSQL plans a condition whole, and the Citus catalogue
    -- exists only on Citus.
    IF idem.citus_distributed() THEN
        IF EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition d WHERE d.logicalrelid = p_rel AND d.partmethod = 'h') THEN
            RETURN (SELECT coalesce(max(s.shard_size), 0) / current_setting('block_size')::bigint
                    FROM pg_catalog.citus_shards s WHERE s.table_name = p_rel);
        END IF;
    END IF;
    RETURN pg_relation_size(p_rel) / current_setting('block_size')::bigint;
END
$$;
