-- The benchmark inbox: $1 rows of demo.transfer in 16 tenants, with canonical
-- payloads whose hashes match idem.Canonicalize (the text below is already in
-- RFC 8785 form: members sorted, no whitespace), saved responses of realistic
-- size, and created_at spread over the past. Row g has
--   tenant_id    bench-<g mod 16>
--   operation_id op-<md5(g)>           (random order in the primary key)
--   payload      {"amount":g,"currency":"EUR","from":"acct-<g mod 1000>","to":"acct-<1000 + g mod 1000>"}
-- recovery/bench_test.go generates its input lines from the same rules.
-- Written straight into the tables (the identity and its body, as
-- idem.execute writes them) by the superuser that builds the database:
-- history that no API would backdate.
WITH rows AS (
    SELECT 'bench-' || (g % 16) AS tenant_id,
           'op-' || md5(g::text) AS operation_id,
           p AS payload,
           jsonb_build_object('posting_id', md5('posting' || g)::uuid, 'from_balance', -g, 'to_balance', g) AS response,
           now() - make_interval(secs => g) AS created_at
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
