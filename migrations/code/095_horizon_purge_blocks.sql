-- object: function idem.horizon_purge_blocks(bigint, regclass, bigint, bigint)
-- grant: operator
-- horizon_purge_blocks deletes, in one transaction of the plan's purge, the
-- candidates among heap blocks [p_from_block, p_to_block) of one partition of
-- idem.inbox_body (a TID range scan: each batch reads only its own blocks).
-- holds = 0 is checked on the row being deleted: a conflict recorded on it by
-- a transaction that commits while this one waits is seen, and the body kept.
-- Returns how many rows it deleted.
CREATE OR REPLACE FUNCTION idem.horizon_purge_blocks(p_plan bigint, p_part regclass, p_from_block bigint, p_to_block bigint)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_p     idem.horizon_plan := idem.horizon_lock_purging(p_plan);
    v_start timestamptz := clock_timestamp();
    v_n     bigint;
BEGIN
    IF v_p.action <> 'purge' OR NOT EXISTS (SELECT 1 FROM idem.inbox_body_partitions() WHERE part = p_part) THEN
        RAISE EXCEPTION '% is not a partition of idem.inbox_body, or plan % does not purge bodies', p_part, v_p.id
            USING ERRCODE = 'IX302';
    END IF;
    -- On Citus the batch is recorded in the plan (a reference table) after the
    -- DELETE over every shard: the transaction must not run that in parallel.
    IF idem.citus_distributed() THEN
        PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true);
    END IF;
    -- Bounds computed here, as values: on Citus a multi-shard DELETE takes no
    -- call of a non-immutable function inside COALESCE.
    EXECUTE format($q$DELETE FROM %s b
        WHERE b.ctid >= $5 AND b.ctid < $6
          AND b.op_class = $2 AND b.created_at < $3 AND b.created_at < $4
          AND b.holds = 0
          AND NOT EXISTS (SELECT 1 FROM idem.horizon_pin x
                          WHERE x.plan_id = $1 AND x.tenant_id = b.tenant_id AND x.operation_id = b.operation_id)$q$, p_part)
        USING v_p.id, v_p.op_class, v_p.cutoff, now() - coalesce(v_p.min_age, interval '0'),
              format('(%s,0)', p_from_block)::tid, format('(%s,0)', p_to_block)::tid;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    PERFORM idem.horizon_record_batch(v_p.id, p_part::text, 'batch', v_n, 0, v_start);
    RETURN v_n;
END
$$;
