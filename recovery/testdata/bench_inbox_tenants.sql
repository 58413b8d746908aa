-- The 100-tenant benchmark inbox (the shape where a batched lookup once
-- became a scan): $1 rows of demo.transfer in $2 tenants, created_at spread
-- evenly over the past $3 days. Row g is testdata/bench_inbox.sql's row g but
-- for its tenant, bench-<g mod $2>, and its created_at.
WITH rows AS (
    SELECT 'bench-' || (g % $2::int) AS tenant_id,
           'op-' || md5(g::text) AS operation_id,
           p AS payload,
           jsonb_build_object('posting_id', md5('posting' || g)::uuid, 'from_balance', -g, 'to_balance', g) AS response,
           now() - make_interval(secs => g::float8 * $3::int * 86400 / $1::int) AS created_at
    FROM generate_series(1, $1::int) AS g,
         LATERAL (SELECT '{"amount":' || g || ',"currency":"EUR","from":"acct-' || (g % 1000) ||
                         '","to":"acct-' || (1000 + g % 1000) || '"}' AS p) AS payload
), identities AS (
    INSERT INTO idem.identity (tenant_id, operation_id, op_class, payload_digest, created_at)
    SELECT tenant_id, operation_id, 'demo.transfer', sha256(convert_to(payload, 'UTF8')), created_at FROM rows
    RETURNING 1
)
INSERT INTO idem.inbox_body (tenant_id, operation_id, created_at, op_class, payload, response)
SELECT tenant_id, operation_id, created_at, 'demo.transfer', payload, response FROM rows;
