-- object: function idem.inbox_body_ensure(date, date)
-- grant: operator
-- inbox_body_ensure creates the daily partitions (UTC days) from p_from to
-- p_to that do not exist yet, skipping days the default partition already
-- holds rows for (those stay there), at most 400 days a call. Run by every
-- installation of this code package and every idemctl horizon command;
-- schedule `idemctl horizon maintain` daily so that tomorrow always has its
-- partition. Returns how many it created. On Citus a partition made here is
-- distributed with its parent, and the transaction is switched to Citus's
-- sequential mode first: DDL on a distributed table may not follow a
-- parallel read of it (the default partition's range) in one transaction.
CREATE OR REPLACE FUNCTION idem.inbox_body_ensure(p_from date, p_to date)
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_day     date := p_from;
    v_made    integer := 0;
    v_def_min timestamptz;
    v_def_max timestamptz;
    v_lo      timestamptz;
    v_hi      timestamptz;
BEGIN
    IF p_from IS NULL OR p_to IS NULL OR p_to - p_from > 400 THEN
        RAISE EXCEPTION 'inbox partitions: give a range of at most 400 days' USING ERRCODE = '22023';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('idem.inbox_body_ensure'));
    IF idem.citus_distributed() THEN
        PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true);
    END IF;
    SELECT min(created_at), max(created_at) INTO v_def_min, v_def_max FROM idem.inbox_body_default;
    WHILE v_day <= p_to LOOP
        v_lo := v_day::timestamp AT TIME ZONE 'UTC';
        v_hi := (v_day + 1)::timestamp AT TIME ZONE 'UTC';
        IF NOT EXISTS (
               SELECT 1 FROM idem.inbox_body_partitions() p
               WHERE p.lower_bound < v_hi AND (p.upper_bound IS NULL OR p.upper_bound > v_lo) AND NOT p.is_default)
           AND NOT (v_def_min IS NOT NULL AND v_def_min < v_hi AND v_def_max >= v_lo) THEN
            EXECUTE format('CREATE TABLE idem.%I PARTITION OF idem.inbox_body FOR VALUES FROM (%L) TO (%L)',
                           'inbox_body_p' || to_char(v_day, 'YYYYMMDD'), v_lo, v_hi);
            v_made := v_made + 1;
        END IF;
        v_day := v_day + 1;
    END LOOP;
    RETURN v_made;
END
$$;
