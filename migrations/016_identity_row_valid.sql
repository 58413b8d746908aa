-- 016_identity_row_valid: idem.identity's three CHECK constraints become one
-- that calls a PL/pgSQL function. PostgreSQL 15 reads every CHECK of a table
-- again from its stored node text, and sets it up, at the start of every
-- INSERT or UPDATE statement: identity_valid alone was 3.2 KB of node text,
-- 113,000 server instructions a new operation, the three 147,000 (a third of
-- the executor's own work beside the effect). A call of one function is 0.4
-- KB to read; its body is set up once a transaction. Measured with
-- scripts/executor-instructions.sh: see BENCHMARKS.md.
--
-- The rules are the same (idem.identity_problem, and idem.Identity.Validate
-- in Go): tenant_id 1-128 bytes, operation_id 1-256 bytes, neither with a
-- control character (U+0001-U+001F, U+007F-U+009F), a digest of 32 bytes,
-- holds never below zero. The columns are NOT NULL, so the result is never
-- NULL. The function is part of the table's definition, not of the code
-- package: changing a rule is a new migration that validates the table
-- again. It is an internal helper (granted to nobody, SECURITY INVOKER,
-- IMMUTABLE): only the owner writes idem.identity.
--
-- On a live inbox this takes ACCESS EXCLUSIVE on idem.identity only for the
-- catalogue change (NOT VALID: new rows are checked at once, existing rows
-- are not read here); 017 validates them under SHARE UPDATE EXCLUSIVE, which
-- lets the executor go on inserting while it reads the table.
CREATE FUNCTION idem.identity_row_valid(p_tenant_id text, p_operation_id text, p_payload_digest bytea, p_holds integer)
RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    -- One expression, as few function calls as the rules allow (each is
    -- set up and its EXECUTE right checked once a transaction): the regular
    -- expression also says "not empty".
    RETURN octet_length(p_tenant_id) <= 128 AND octet_length(p_operation_id) <= 256
       AND p_tenant_id ~ '^[^\x01-\x1f\x7f-\x9f]+$' AND p_operation_id ~ '^[^\x01-\x1f\x7f-\x9f]+$'
       AND octet_length(p_payload_digest) = 32 AND p_holds >= 0;
END
$$;

REVOKE ALL ON FUNCTION idem.identity_row_valid(text, text, bytea, integer) FROM PUBLIC;

ALTER TABLE idem.identity
    DROP CONSTRAINT identity_valid,
    DROP CONSTRAINT identity_digest_form,
    DROP CONSTRAINT identity_holds_check,
    ADD CONSTRAINT identity_row_valid CHECK (idem.identity_row_valid(tenant_id, operation_id, payload_digest, holds)) NOT VALID;
