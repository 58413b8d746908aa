-- object: function idem.import_stage_problem(text, text, text, text, jsonb, timestamptz, text, text)
-- import_stage_problem says what is wrong with one staged row of an import
-- plan (idem.import_plan_seal_stage), or NULL: the identity rules, a
-- created_at unknown or in the future, no response (SQL NULL or JSON
-- null: an operation without its saved response is not finished), either
-- a payload (JSON of at most 1 MiB and 64 levels, hashed jcs-sha256 over
-- exactly its bytes) or the store's own hash (64 lowercase hex) alone, and
-- the evidence (as entry_item's CHECK). The response is jsonb already (the stage's column:
-- the COPY parsed it). A payload that is not JSON raises (22P02). Cheap
-- tests only: it runs once a row of a million-row import, in parallel
-- workers when the database has them (PARALLEL SAFE). Internal: granted
-- to nobody.
CREATE OR REPLACE FUNCTION idem.import_stage_problem(
    p_tenant_id text, p_operation_id text, p_payload text, p_payload_hash text, p_response jsonb,
    p_created_at timestamptz, p_store_hash text, p_evidence text
) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN p_tenant_id IS NULL OR p_tenant_id = '' OR octet_length(p_tenant_id) > 128 OR p_tenant_id ~ '[\x01-\x1f\x7f-\x9f]'
          OR p_operation_id IS NULL OR p_operation_id = '' OR octet_length(p_operation_id) > 256
          OR p_operation_id ~ '[\x01-\x1f\x7f-\x9f]' THEN idem.identity_problem(p_tenant_id, p_operation_id)
        WHEN p_created_at IS NULL THEN 'created_at is unknown'
        WHEN p_created_at > now() THEN format('created_at %s is in the future', p_created_at)
        WHEN p_response IS NULL OR jsonb_typeof(p_response) = 'null' THEN 'no response (JSON null is none)'
        WHEN p_evidence IS NULL OR btrim(p_evidence) = '' OR octet_length(p_evidence) > 1024 OR p_evidence ~ '[\x01-\x1f\x7f-\x9f]'
            THEN 'its evidence is empty, too long or holds control characters'
        WHEN p_payload IS NULL AND p_payload_hash IS NULL THEN
            CASE WHEN p_store_hash IS NULL OR octet_length(p_store_hash) <> 64 OR p_store_hash ~ '[^0-9a-f]'
                 THEN 'neither a payload nor the store''s hash (64 lowercase hex)' END
        WHEN p_payload IS NULL OR p_payload_hash IS NULL OR p_store_hash IS NOT NULL THEN 'a payload and its hash, or the store''s hash alone'
        WHEN octet_length(p_payload) > 1048576 THEN format('payload is too large: %s bytes, at most 1048576', octet_length(p_payload))
        WHEN p_payload_hash <> 'jcs-sha256:' || encode(sha256(convert_to(p_payload, 'UTF8')), 'hex')
            THEN 'payload hash is not jcs-sha256:<hex> of exactly the payload''s bytes'
        WHEN octet_length(p_payload) - octet_length(replace(replace(p_payload, '{', ''), '[', '')) > 64 AND idem.json_too_deep(p_payload, 64)
            THEN 'payload is nested more than 64 levels deep'
        WHEN jsonb_typeof(p_payload::jsonb) IS NULL THEN 'payload is not JSON'
    END
$$;
