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
-- sort of the whole table). Returns the rows counted, hash-only rows, the
-- oldest and newest created_at, the first and last n, and the digest.
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
AS $$
DECLARE
    v_n bigint;
BEGIN
    EXECUTE format('SELECT count(*) FROM %s', p_stage) INTO v_n;
    RETURN QUERY EXECUTE format($q$
        SELECT coalesce(sum(r.staged), 0)::bigint, coalesce(sum(r.hash_only), 0)::bigint, min(r.oldest), max(r.newest),
               min(r.first_n), max(r.last_n), sha256(string_agg(r.digest, ''::bytea ORDER BY k))
        FROM generate_series(0, (greatest($1, 1) - 1) / 4096) k,
        LATERAL (SELECT count(*) AS staged, count(s.store_hash) AS hash_only, min(s.created_at) AS oldest,
                        max(s.created_at) AS newest, min(s.n) AS first_n, max(s.n) AS last_n,
                        sha256(string_agg(textsend(row(s.tenant_id, s.operation_id, s.payload_hash, s.store_hash,
                                                       s.response::jsonb, s.created_at, s.evidence)::text), ''::bytea
                                          ORDER BY s.n)) AS digest
                 FROM %s s
                 WHERE s.n BETWEEN k * 4096 + 1 AND (k + 1) * 4096) r$q$, p_stage)
    USING v_n;
END
$$;
