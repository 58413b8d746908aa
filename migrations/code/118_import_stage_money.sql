-- object: function idem.import_stage_money(text, jsonb)
-- import_stage_money adds up, for the approver of an import plan of a
-- money class, the amounts of its staged rows (p_stage, checked already:
-- every payload is JSON) per currency, by the class's declaration
-- (p_money: JSON Pointers to the amount and the currency, the unit), as
-- idemctl adds up a record plan's: {"unit", "currencies": [{"currency"
-- (upper-cased), "amount" (their exact sum, in the declared unit),
-- "records", "negative" and "negative_records" (the sum and count of the
-- negative amounts among them, which the net sum can hide)}], "unread": the rows whose amount or currency cannot be read
-- (none there, not a number or a plain decimal string, not a whole number
-- of minor units, or no payload: a hash-only row), "first_unread": {n,
-- tenant_id, operation_id} of the first}. idemctl converts minor units and
-- names a currency that is not ISO 4217. Internal: granted to nobody.
CREATE OR REPLACE FUNCTION idem.import_stage_money(p_stage text, p_money jsonb)
RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_paths text[];
    v_sums   jsonb;
    v_unread bigint;
    v_first  jsonb;
BEGIN
    -- JSON Pointer to path: '/a~1b/0' is {a/b,0} (~1 before ~0, RFC 6901).
    SELECT array_agg(
               (SELECT coalesce(array_agg(replace(replace(t, '~1', '/'), '~0', '~') ORDER BY o), '{}')
                FROM unnest(string_to_array(substr(p, 2), '/')) WITH ORDINALITY u(t, o))::text)
    INTO v_paths
    FROM unnest(ARRAY[p_money ->> 'amount', p_money ->> 'currency']) WITH ORDINALITY q(p, k);
    EXECUTE format($q$
        WITH r AS MATERIALIZED (
            -- each payload parsed once (OFFSET 0 keeps the subqueries whole),
            -- only its amount and currency kept
            SELECT s.n, s.tenant_id, s.operation_id, x.a, x.c
            FROM %s s
            CROSS JOIN LATERAL (SELECT j.d #> $1::text[] AS a, j.d #> $2::text[] AS c
                                FROM (SELECT s.payload::jsonb AS d OFFSET 0) j OFFSET 0) x
        ), v AS (
            SELECT r.n, r.tenant_id, r.operation_id, t.amount, t.currency,
                   t.amount IS NOT NULL AND t.currency IS NOT NULL AND ($3 <> 'minor' OR t.amount = trunc(t.amount)) AS readable
            FROM r
            CROSS JOIN LATERAL (
                SELECT CASE WHEN jsonb_typeof(r.a) = 'number' THEN (r.a #>> '{}')::numeric
                            WHEN jsonb_typeof(r.a) = 'string' AND r.a #>> '{}' ~ '^-?[0-9]{1,40}(\.[0-9]{1,40})?$'
                            THEN (r.a #>> '{}')::numeric END AS amount,
                       CASE WHEN jsonb_typeof(r.c) = 'string' THEN upper(r.c #>> '{}') END AS currency) t
        )
        SELECT (SELECT coalesce(jsonb_agg(jsonb_build_object('currency', t.currency, 'amount', t.total::text, 'records', t.k,
                                                             'negative', t.neg::text, 'negative_records', t.negk)
                                          ORDER BY t.currency), '[]'::jsonb)
                FROM (SELECT v.currency, sum(v.amount) AS total, count(*) AS k,
                             coalesce(sum(v.amount) FILTER (WHERE v.amount < 0), 0) AS neg,
                             count(*) FILTER (WHERE v.amount < 0) AS negk
                      FROM v WHERE v.readable GROUP BY v.currency) t),
               (SELECT count(*) FROM v WHERE NOT v.readable),
               (SELECT jsonb_build_object('n', v.n, 'tenant_id', v.tenant_id, 'operation_id', v.operation_id)
                FROM v WHERE NOT v.readable ORDER BY v.n LIMIT 1)$q$, p_stage)
    INTO v_sums, v_unread, v_first
    USING v_paths[1], v_paths[2], p_money ->> 'unit';
    RETURN jsonb_build_object('unit', p_money ->> 'unit', 'currencies', v_sums, 'unread', v_unread, 'first_unread', v_first);
END
$$;
