-- object: function idem.import_batch(jsonb)
-- import_batch reads a batch of import items (idem.import_plan_add) as rows,
-- numbered from 1 in their order. Internal: granted to nobody.
CREATE OR REPLACE FUNCTION idem.import_batch(p_items jsonb)
RETURNS TABLE (n bigint, tenant_id text, operation_id text, class text, payload text, payload_hash text,
               response jsonb, evidence text, created_at timestamptz, store_hash text)
LANGUAGE sql IMMUTABLE
AS $$
    SELECT x.n, r.tenant_id, r.operation_id, r.class, r.payload, r.payload_hash, r.response, r.evidence, r.created_at, r.store_hash
    FROM jsonb_array_elements(p_items) WITH ORDINALITY AS x(item, n)
    CROSS JOIN LATERAL jsonb_to_record(x.item) AS r(tenant_id text, operation_id text, class text, payload text,
        payload_hash text, response jsonb, evidence text, created_at timestamptz, store_hash text)
$$;
