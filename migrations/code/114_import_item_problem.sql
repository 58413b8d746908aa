-- object: function idem.import_item_problem(text, text, text, text, text, timestamptz, text)
-- import_item_problem says what is wrong with one item of an import plan,
-- or NULL: the identity rules, a created_at that is unknown or in the
-- future, a response that is not there (SQL NULL or JSON null), and
-- either a payload (JSON text of at most 1 MiB and 64 levels) with the
-- jcs-sha256 hash of exactly its bytes, or the store's own hash (64
-- lowercase hex) alone. A text that is not JSON raises (22P02). The evidence is checked by entry_item's CHECK.
-- Cheap tests only (no bounded-repetition regex): it runs once a row of a
-- million-row import. Internal: granted to nobody.
CREATE OR REPLACE FUNCTION idem.import_item_problem(
    p_tenant_id text, p_operation_id text, p_payload text, p_payload_hash text, p_response text,
    p_created_at timestamptz, p_store_hash text
) RETURNS text
LANGUAGE sql STABLE
AS $$
    SELECT CASE
        WHEN p_tenant_id IS NULL OR p_tenant_id = '' OR octet_length(p_tenant_id) > 128 OR p_tenant_id ~ '[\x01-\x1f\x7f-\x9f]'
          OR p_operation_id IS NULL OR p_operation_id = '' OR octet_length(p_operation_id) > 256
          OR p_operation_id ~ '[\x01-\x1f\x7f-\x9f]' THEN idem.identity_problem(p_tenant_id, p_operation_id)
        WHEN p_created_at IS NULL THEN 'created_at is unknown'
        WHEN p_created_at > now() THEN format('created_at %s is in the future', p_created_at)
        WHEN p_response IS NULL OR jsonb_typeof(p_response::jsonb) IS NULL OR jsonb_typeof(p_response::jsonb) = 'null'
            THEN 'no response (JSON null is none)'
        WHEN p_payload IS NULL AND p_payload_hash IS NULL THEN
            CASE WHEN p_store_hash IS NULL OR octet_length(p_store_hash) <> 64 OR p_store_hash ~ '[^0-9a-f]'
                 THEN 'neither a payload nor the store''s hash (64 lowercase hex)' END
        WHEN p_payload IS NULL OR p_payload_hash IS NULL OR p_store_hash IS NOT NULL THEN 'a payload and its hash, or the store''s hash alone'
        WHEN octet_length(p_payload) > 1048576 THEN format('payload is too large: %s bytes, at most 1048576', octet_length(p_payload))
        WHEN p_payload_hash <> 'jcs-sha256:' || encode(sha256(convert_to(p_payload, 'UTF8')), 'hex')
            THEN 'payload hash is not jcs-sha256:<hex> of exactly the payload''s bytes'
        WHEN octet_length(p_payload) - octet_length(translate(p_payload, '[{', '')) > 64 AND idem.json_too_deep(p_payload, 64)
            THEN 'payload is nested more than 64 levels deep'
        WHEN jsonb_typeof(p_payload::jsonb) IS NULL THEN 'payload is not JSON'
    END
$$;
