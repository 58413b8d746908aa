-- object: function idem.horizon_drop_tombstones_blocks(bigint, bigint, bigint)
-- grant: operator
-- horizon_drop_tombstones_blocks deletes, in one transaction of a
-- drop_tombstones plan's purge, the tombstones among heap blocks of
-- idem.identity that the plan covers: no body, of its class, before its
-- cutoff and min-age, not pinned, not held by quarantine evidence (holds = 0,
-- checked on the row being deleted). Returns how many it deleted.
CREATE OR REPLACE FUNCTION idem.horizon_drop_tombstones_blocks(p_plan bigint, p_from_block bigint, p_to_block bigint)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_p     idem.horizon_plan := idem.horizon_lock_purging(p_plan);
    v_start timestamptz := clock_timestamp();
    v_n     bigint;
    -- Bounds as values: on Citus a multi-shard DELETE takes no call of a
    -- non-immutable function inside COALESCE.
    v_young timestamptz := now() - coalesce(v_p.min_age, interval '0');
    v_from  tid := format('(%s,0)', p_from_block)::tid;
    v_to    tid := format('(%s,0)', p_to_block)::tid;
BEGIN
    IF v_p.retention <> 'horizon' OR v_p.action <> 'drop_tombstones' THEN
        RAISE EXCEPTION 'plan % does not drop tombstones of a horizon class', p_plan USING ERRCODE = 'IX302';
    END IF;
    -- On Citus the batch is recorded in the plan (a reference table) after the
    -- DELETE over every shard: the transaction must not run that in parallel.
    IF idem.citus_distributed() THEN
        PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true);
    END IF;
    DELETE FROM idem.identity i
    WHERE i.ctid >= v_from AND i.ctid < v_to
      AND i.op_class = v_p.op_class AND i.created_at < v_p.cutoff
      AND i.created_at < v_young AND i.holds = 0
      AND NOT EXISTS (SELECT 1 FROM idem.horizon_pin x
                      WHERE x.plan_id = v_p.id AND x.tenant_id = i.tenant_id AND x.operation_id = i.operation_id)
      AND NOT EXISTS (SELECT 1 FROM idem.inbox_body b
                      WHERE b.tenant_id = i.tenant_id AND b.operation_id = i.operation_id AND b.created_at = i.created_at);
    GET DIAGNOSTICS v_n = ROW_COUNT;
    PERFORM idem.horizon_record_batch(v_p.id, 'idem.identity', 'tombstones', v_n, 0, v_start);
    RETURN v_n;
END
$$;
