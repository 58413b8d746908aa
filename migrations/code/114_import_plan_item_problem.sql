-- object: function idem.import_plan_item_problem(text, text, timestamptz, text, bytea)
-- import_plan_item_problem says what is wrong with one item of an import
-- plan as the planner sends it (no payload, no response: those are checked
-- when the run stages them, idem.import_item_problem), or NULL: the
-- identity rules, a created_at that is unknown or in the future, the
-- store's own hash (64 lowercase hex) when given, a fingerprint of 32
-- bytes. Internal: granted to nobody.
CREATE OR REPLACE FUNCTION idem.import_plan_item_problem(
    p_tenant_id text, p_operation_id text, p_created_at timestamptz, p_store_hash text, p_fingerprint bytea
) RETURNS text
LANGUAGE sql STABLE
AS $$
    SELECT CASE
        WHEN p_tenant_id IS NULL OR p_tenant_id = '' OR octet_length(p_tenant_id) > 128 OR p_tenant_id ~ '[\x01-\x1f\x7f-\x9f]'
          OR p_operation_id IS NULL OR p_operation_id = '' OR octet_length(p_operation_id) > 256
          OR p_operation_id ~ '[\x01-\x1f\x7f-\x9f]' THEN idem.identity_problem(p_tenant_id, p_operation_id)
        WHEN p_created_at IS NULL THEN 'created_at is unknown'
        WHEN p_created_at > now() THEN format('created_at %s is in the future', p_created_at)
        WHEN p_store_hash IS NOT NULL AND (octet_length(p_store_hash) <> 64 OR p_store_hash ~ '[^0-9a-f]')
            THEN 'the store''s hash is not 64 lowercase hex'
        WHEN p_fingerprint IS NULL OR octet_length(p_fingerprint) <> 32 THEN 'the fingerprint is not 32 bytes'
    END
$$;
