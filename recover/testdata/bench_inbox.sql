-- The benchmark inbox: $1 rows of demo.transfer in 16 tenants, with canonical
-- payloads whose hashes match idem.Canonicalize (the text below is already in
-- RFC 8785 form: members sorted, no whitespace), saved responses of realistic
-- size, and created_at spread over the past. Row g has
--   tenant_id    bench-<g mod 16>
--   operation_id op-<md5(g)>           (random order in the primary key)
--   payload      {"amount":g,"currency":"EUR","from":"acct-<g mod 1000>","to":"acct-<1000 + g mod 1000>"}
-- recover/bench_test.go generates its input lines from the same rules.
INSERT INTO idem.inbox (tenant_id, operation_id, op_class, payload_hash, payload, response, created_at)
SELECT 'bench-' || (g % 16),
       'op-' || md5(g::text),
       'demo.transfer',
       'jcs-sha256:' || encode(sha256(convert_to(p, 'UTF8')), 'hex'),
       p::jsonb,
       jsonb_build_object('posting_id', md5('posting' || g)::uuid, 'from_balance', -g, 'to_balance', g),
       now() - make_interval(secs => g)
FROM generate_series(1, $1::int) AS g,
     LATERAL (SELECT '{"amount":' || g || ',"currency":"EUR","from":"acct-' || (g % 1000) ||
                     '","to":"acct-' || (1000 + g % 1000) || '"}' AS p) AS payload;
