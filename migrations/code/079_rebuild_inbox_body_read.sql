-- object: function idem.rebuild_inbox_body_read()
-- rebuild_inbox_body_read regenerates idem.inbox_body_read, the reader of one
-- body by its primary key that idem.settle answers a replay with, when the
-- partitions of idem.inbox_body are not the ones it was generated for. In
-- PostgreSQL 15 a generic plan over the partitioned table locks every
-- partition at each execution, whatever it prunes (a replay on an inbox of
-- 1,000 day partitions cost six times one of 10), and a custom plan costs
-- its planning each time; the generated reader finds the partition by a
-- binary search on created_at and probes it by a static statement, whose
-- plan is cached and names that one table. What it does not find there it
-- reads again through idem.inbox_body, in the same snapshot, so a partition
-- created by hand since is still read, only slower. The second result says
-- whether the body exists, the third whether, missing, the caller's
-- snapshot predates the last purge swap (idem.snapshot_predates_swap). Run
-- by idem.inbox_body_ensure; returns true when it regenerated the reader.
-- Like idem.run_effect, the reader is owned by the schema owner, executable
-- by nobody else, and runs as its caller.
CREATE OR REPLACE FUNCTION idem.rebuild_inbox_body_read()
RETURNS boolean
LANGUAGE plpgsql
AS $rebuild$
DECLARE
    v_parts text[];
    v_los   timestamptz[];
    v_his   timestamptz[];
    v_sig   text;
    v_n     integer;
    v_tree  text;
BEGIN
    SELECT coalesce(array_agg(p.part::text ORDER BY p.lower_bound), '{}'),
           coalesce(array_agg(p.lower_bound ORDER BY p.lower_bound), '{}'),
           coalesce(array_agg(p.upper_bound ORDER BY p.lower_bound), '{}')
    INTO v_parts, v_los, v_his
    FROM idem.inbox_body_partitions() p
    WHERE NOT p.is_default AND p.lower_bound IS NOT NULL AND p.upper_bound IS NOT NULL;
    v_sig := 'partitions ' || md5(array_to_string(v_parts, ',') || array_to_string(v_los, ',') || array_to_string(v_his, ','));
    IF obj_description(to_regprocedure('idem.inbox_body_read(text, text, timestamptz)'), 'pg_proc') = v_sig THEN
        RETURN false;
    END IF;
    -- Replays are mostly of the last days: the newest 16 partitions (the
    -- week ahead among them) are searched apart, in four steps, whatever
    -- the number of older ones.
    v_n := cardinality(v_parts);
    IF v_n > 32 THEN
        v_tree := format($t$
    IF p_created_at >= %L THEN %s
    ELSE %s
    END IF;$t$, v_los[v_n - 15], idem.inbox_body_read_tree(v_parts, v_los, v_his, v_n - 15, v_n),
            idem.inbox_body_read_tree(v_parts, v_los, v_his, 1, v_n - 16));
    ELSE
        v_tree := idem.inbox_body_read_tree(v_parts, v_los, v_his, 1, v_n);
    END IF;
    EXECUTE format($fn$
CREATE OR REPLACE FUNCTION idem.inbox_body_read(
    p_tenant_id text, p_operation_id text, p_created_at timestamptz,
    OUT response jsonb, OUT present boolean, OUT stale boolean
)
LANGUAGE plpgsql STABLE
AS $body$
BEGIN%s
    IF FOUND THEN
        present := true;
        stale := false;
        RETURN;
    END IF;
    SELECT b.response, b.tenant_id IS NOT NULL, b.tenant_id IS NULL AND idem.snapshot_predates_swap()
    INTO response, present, stale
    FROM (SELECT) AS one
    LEFT JOIN idem.inbox_body b
           ON b.tenant_id = p_tenant_id AND b.operation_id = p_operation_id AND b.created_at = p_created_at;
END
$body$$fn$, v_tree);
    EXECUTE format('COMMENT ON FUNCTION idem.inbox_body_read(text, text, timestamptz) IS %L', v_sig);
    REVOKE ALL ON FUNCTION idem.inbox_body_read(text, text, timestamptz) FROM PUBLIC;
    RETURN true;
END
$rebuild$;
