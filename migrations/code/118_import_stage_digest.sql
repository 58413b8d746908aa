-- object: function idem.import_stage_digest(regclass)
-- import_stage_digest is the one computation of a staged import's items
-- digest, over the table p_stage: the plan's stage when it is sealed
-- (idem.import_plan_seal_stage) and the rows its approver read again from
-- the source when it is approved (pg_temp.idem_import_check,
-- idem.import_approve_check). The digest is sha256 over the sha256 of each
-- run of 4096 rows in the order n, a row being the text of the record
-- (tenant_id, operation_id, payload_hash, store_hash, response as jsonb,
-- created_at in UTC, evidence): the payload is covered by its hash, which
-- the seal checked is the payload's. Read by runs of 4096 on the key n (no
-- sort of the whole table), each run's rows fed to string_agg by a subquery
-- ordered on n, which an index scan of the run gives as it reads (an ORDER
-- BY inside the aggregate sorted every run again: a fifth to a third of
-- the digest's CPU; the digest is the same). The scan is pinned: no
-- parallel worker, no bitmap scan and no sort (the approver's temporary
-- table has no statistics, and the planner would sort each run again).
-- Returns the rows counted, hash-only rows, the oldest and newest
-- created_at, the first and last n, and the digest.
-- Internal: granted to nobody.
CREATE OR REPLACE FUNCTION idem.import_stage_digest(p_stage regclass)
RETURNS TABLE (staged bigint, hash_only bigint, oldest timestamptz, newest timestamptz, first_n bigint, last_n bigint, digest bytea)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
SET jit = off
SET TimeZone = 'UTC'
SET DateStyle = 'ISO, YMD'
SET IntervalStyle = 'postgres'
SET extra_float_digits = 1
SET max_parallel_workers_per_gather = 0
SET enable_sort = off
SET enable_bitmapscan = off
AS $$
DECLARE
    v_n bigint;
BEGIN
    EXECUTE format('SELECT count(*) FROM %s', p_stage) INTO v_n;
    RETURN QUERY EXECUTE format($q$
        SELECT coalesce(sum(r.staged), 0)::bigint, coalesce(sum(r.hash_only), 0)::bigint, min(r.oldest), max(r.newest),
               min(r.first_n), max(r.last_n), sha256(string_agg(r.digest, ''::bytea ORDER BY k))
        FROM generate_series(0, (greatest($1, 1) - 1) / 4096) k,
        LATERAL (SELECT count(*) AS staged, count(q.store_hash) AS hash_only, min(q.created_at) AS oldest,
                        max(q.created_at) AS newest, min(q.n) AS first_n, max(q.n) AS last_n,
                        sha256(string_agg(q.t, ''::bytea)) AS digest
                 FROM (SELECT s.n, s.store_hash, s.created_at,
                              textsend(row(s.tenant_id, s.operation_id, s.payload_hash, s.store_hash,
                                           s.response::jsonb, s.created_at, s.evidence)::text) AS t
                       FROM %s s
                       WHERE s.n BETWEEN k * 4096 + 1 AND (k + 1) * 4096
                       ORDER BY s.n) q) r$q$, p_stage)
    USING v_n;
END
$$;
