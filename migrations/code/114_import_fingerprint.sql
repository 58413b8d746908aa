-- object: function idem.import_fingerprint(text, text, text, text, text, timestamptz)
-- import_fingerprint is what an import plan keeps of an item: sha256 over
-- its tenant and operation ids, its payload hash (jcs-sha256:<hex>) or the
-- store's own hash (64 hex), its response text and its created_at in
-- microseconds since the epoch, each text length-prefixed ("<bytes>:<text>",
-- "-" for NULL). idemctl computes the same bytes (importer.Fingerprint); the
-- run recomputes it from the rows it staged and enters them only if each
-- matches its planned item. STABLE, not IMMUTABLE: its body's text
-- conversions are stable, and a function declared stricter than its body
-- is not inlined (four times slower over a million rows). Internal: granted
-- to nobody.
CREATE OR REPLACE FUNCTION idem.import_fingerprint(
    p_tenant_id text, p_operation_id text, p_payload_hash text, p_store_hash text, p_response text, p_created_at timestamptz
) RETURNS bytea
LANGUAGE sql STABLE
AS $$
    SELECT sha256(convert_to(
        octet_length(p_tenant_id) || ':' || p_tenant_id || octet_length(p_operation_id) || ':' || p_operation_id
        || coalesce(octet_length(p_payload_hash) || ':' || p_payload_hash, '-')
        || coalesce(octet_length(p_store_hash) || ':' || p_store_hash, '-')
        || coalesce(octet_length(p_response) || ':' || p_response, '-')
        || coalesce((extract(epoch FROM p_created_at) * 1000000)::bigint::text, '-'), 'UTF8'))
$$;
