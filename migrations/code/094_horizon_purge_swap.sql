-- object: function idem.horizon_purge_swap(bigint, regclass, double precision)
-- grant: operator
-- horizon_purge_swap empties one day partition that lies wholly before the
-- plan's cutoff in one short transaction of the plan's purge (see
-- idem.horizon_lock_purging): the rows to keep (other classes, pinned, held by
-- quarantine evidence) are set aside in a temporary table, the partition is
-- truncated and the kept rows go back. It first takes the partition in
-- EXCLUSIVE mode, which waits for every transaction that is recording a
-- conflict on one of its rows (they hold row locks) and holds off new ones, so
-- the evidence it keeps is complete. When more than p_keep_ratio of the rows
-- would be kept, or the class's min-age still protects part of the day, it
-- does nothing (swapped false) and the caller deletes by batches.
-- TRUNCATE is not MVCC-safe: a snapshot taken before the swap committed sees
-- the kept rows as gone. The swap records its transaction id in
-- idem.body_swap_xid, so that a reader missing a body can tell (see
-- idem.settle): it reads again in a new snapshot, or gets 40001 under
-- REPEATABLE READ; it is never told "purged" for a body that was kept.
-- On Citus there is no swap (swapped false: the caller deletes by batches,
-- which MVCC covers): a worker's reader cannot judge its snapshot against the
-- coordinator's transaction id.
CREATE OR REPLACE FUNCTION idem.horizon_purge_swap(
    p_plan bigint, p_part regclass, p_keep_ratio double precision,
    OUT purged bigint, OUT kept bigint, OUT swapped boolean
)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_p     idem.horizon_plan := idem.horizon_lock_purging(p_plan);
    v_start timestamptz := clock_timestamp();
    v_hi    timestamptz;
    v_total bigint;
BEGIN
    SELECT upper_bound INTO v_hi FROM idem.inbox_body_partitions() WHERE part = p_part AND NOT is_default;
    IF v_hi IS NULL OR v_hi > v_p.cutoff OR v_p.action <> 'purge' THEN
        RAISE EXCEPTION 'partition % is not a day of idem.inbox_body wholly before the cutoff % of plan %', p_part, v_p.cutoff, v_p.id
            USING ERRCODE = 'IX302';
    END IF;
    purged := 0;
    kept := 0;
    swapped := false;
    IF idem.citus_distributed() THEN
        RETURN;
    END IF;
    IF v_hi > now() - coalesce(v_p.min_age, interval '0') THEN
        RETURN;
    END IF;
    EXECUTE format('LOCK TABLE %s IN EXCLUSIVE MODE', p_part);
    -- One swap at a time, each naming itself for readers whose snapshot
    -- predates it (idem.snapshot_predates_swap).
    PERFORM pg_advisory_xact_lock(hashtext('idem.horizon_purge_swap'));
    PERFORM setval('idem.body_swap_xid', pg_current_xact_id()::text::bigint);
    EXECUTE format($q$CREATE TEMPORARY TABLE horizon_keep ON COMMIT DROP AS
        SELECT b.* FROM %1$s b
        WHERE b.op_class < $2 OR b.op_class > $2
        UNION ALL
        SELECT b.* FROM %1$s b
        WHERE b.op_class = $2
          AND (b.tenant_id, b.operation_id) IN (
                SELECT x.tenant_id, x.operation_id FROM idem.horizon_pin x WHERE x.plan_id = $1
                UNION
                SELECT q.tenant_id, q.operation_id FROM idem.quarantine q
                WHERE q.op_class = $2 AND q.holds_on = 'body' AND q.status IN ('open', 'rejected'))$q$,
        p_part)
        USING v_p.id, v_p.op_class;
    GET DIAGNOSTICS kept = ROW_COUNT;
    EXECUTE format('SELECT count(*) FROM %s', p_part) INTO v_total;
    IF kept > p_keep_ratio * v_total THEN
        DROP TABLE horizon_keep;
        kept := 0;
        RETURN;
    END IF;
    EXECUTE format('TRUNCATE %s', p_part);
    IF kept > 0 THEN
        EXECUTE format('INSERT INTO %s SELECT * FROM horizon_keep', p_part);
    END IF;
    DROP TABLE horizon_keep;
    purged := v_total - kept;
    swapped := true;
    PERFORM idem.horizon_record_batch(v_p.id, p_part::text, 'swap', purged, kept, v_start);
END
$$;
