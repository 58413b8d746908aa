-- object: function idem.identity_problem(text, text)
-- identity_problem says what is wrong with an identity, or NULL when it is
-- valid. The same rules are in Go (idem.Identity.Validate), in the tables'
-- CHECKs (idem.identity's calls idem.identity_row_valid, migration 019) and in
-- idem.execute's well-formed test; keep them in step. Control characters are Unicode category Cc:
-- U+0001-U+001F and U+007F-U+009F (U+0000 cannot be stored in text at all).
CREATE OR REPLACE FUNCTION idem.identity_problem(p_tenant_id text, p_operation_id text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN p_tenant_id IS NULL OR p_tenant_id = '' THEN 'tenant_id is required'
        WHEN octet_length(p_tenant_id) > 128 THEN 'tenant_id is longer than 128 bytes'
        WHEN p_tenant_id ~ '[\x01-\x1f\x7f-\x9f]' THEN 'tenant_id contains a control character'
        WHEN p_operation_id IS NULL OR p_operation_id = '' THEN 'operation_id is required'
        WHEN octet_length(p_operation_id) > 256 THEN 'operation_id is longer than 256 bytes'
        WHEN p_operation_id ~ '[\x01-\x1f\x7f-\x9f]' THEN 'operation_id contains a control character'
    END
$$;
