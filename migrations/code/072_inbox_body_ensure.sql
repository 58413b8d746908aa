-- object: function idem.inbox_body_ensure(date, date)
-- grant: operator
-- inbox_body_ensure creates the partitions (UTC days) from p_from to p_to
-- that do not exist yet, skipping days the default partition already holds
-- rows for (those stay there), at most 400 days a call and at most 31 days
-- ahead of today (UTC): a partition for a day that is still far away is a
-- table every lookup plan carries for nothing. Days of a calendar month that
-- ended more than 60 days ago get one partition for the whole month (when
-- no partition and no row of the default partition lies in it), so that
-- an import of years of history adds twelve tables a year, not 365. Run by
-- every installation of this code package and every idemctl horizon
-- command; schedule `idemctl horizon maintain` daily so that tomorrow always
-- has its partition. Returns how many it created, and rebuilds the body's
-- direct reader (idem.rebuild_inbox_body_read) when the partitions changed.
-- On Citus a partition made here is distributed with its parent, and the
-- transaction is switched to Citus's sequential mode first: DDL on a
-- distributed table may not follow a parallel read of it (the default
-- partition's range) in one transaction.
CREATE OR REPLACE FUNCTION idem.inbox_body_ensure(p_from date, p_to date)
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_today   date := (now() AT TIME ZONE 'UTC')::date;
    v_day     date := p_from;
    v_made    integer := 0;
    v_def_min timestamptz;
    v_def_max timestamptz;
    v_first   date;
    v_next    date;
    v_name    text;
    v_parts   tstzrange[];
    v_range   tstzrange;
BEGIN
    IF p_from IS NULL OR p_to IS NULL OR p_to - p_from > 400 THEN
        RAISE EXCEPTION 'inbox partitions: give a range of at most 400 days' USING ERRCODE = '22023';
    END IF;
    IF p_to > v_today + 31 THEN
        RAISE EXCEPTION 'inbox partitions: % is more than 31 days ahead of today (%, UTC)', p_to, v_today
            USING ERRCODE = '22023', HINT = 'create partitions for the coming days only; idemctl horizon maintain keeps a week ahead';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('idem.inbox_body_ensure'));
    IF idem.citus_distributed() THEN
        PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true);
    END IF;
    SELECT min(created_at), max(created_at) INTO v_def_min, v_def_max FROM idem.inbox_body_default;
    -- The partitions' ranges, read once (a read a day made three years of
    -- days cost seconds), the default partition's rows as one more.
    SELECT coalesce(array_agg(tstzrange(p.lower_bound, p.upper_bound)), '{}') INTO v_parts
    FROM idem.inbox_body_partitions() p WHERE NOT p.is_default;
    IF v_def_min IS NOT NULL THEN
        v_parts := v_parts || tstzrange(v_def_min, v_def_max, '[]');
    END IF;
    WHILE v_day <= p_to LOOP
        -- A month long past, whole, when nothing of it is there yet; else the day.
        v_first := date_trunc('month', v_day)::date;
        v_next := (v_first + interval '1 month')::date;
        v_name := 'inbox_body_m' || to_char(v_day, 'YYYYMM');
        v_range := tstzrange(v_first::timestamp AT TIME ZONE 'UTC', v_next::timestamp AT TIME ZONE 'UTC');
        IF v_next > v_today - 60 OR EXISTS (SELECT 1 FROM unnest(v_parts) r WHERE r && v_range) THEN
            v_first := v_day;
            v_next := v_day + 1;
            v_name := 'inbox_body_p' || to_char(v_day, 'YYYYMMDD');
            v_range := tstzrange(v_first::timestamp AT TIME ZONE 'UTC', v_next::timestamp AT TIME ZONE 'UTC');
        END IF;
        IF NOT EXISTS (SELECT 1 FROM unnest(v_parts) r WHERE r && v_range) THEN
            EXECUTE format('CREATE TABLE idem.%I PARTITION OF idem.inbox_body FOR VALUES FROM (%L) TO (%L)',
                           v_name, v_first::timestamp AT TIME ZONE 'UTC', v_next::timestamp AT TIME ZONE 'UTC');
            v_parts := v_parts || v_range;
            v_made := v_made + 1;
        END IF;
        v_day := greatest(v_day + 1, v_next);
    END LOOP;
    PERFORM idem.rebuild_inbox_body_read();
    RETURN v_made;
END
$$;
