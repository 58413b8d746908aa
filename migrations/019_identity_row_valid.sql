-- 019_identity_row_valid: idem.identity's three CHECK constraints become one
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
-- Four migrations, one statement on idem.identity each (on Citus a
-- migration's text may be sent to the workers whole, and ADD CONSTRAINT may
-- not share a statement with other subcommands): 019 the function, 020 the
-- CHECK added NOT VALID (ACCESS EXCLUSIVE only for the catalogue change: new
-- rows are checked at once, existing rows are not read), 021 the three old
-- CHECKs dropped, 022 the existing rows validated under SHARE UPDATE
-- EXCLUSIVE, which lets the executor go on inserting while it reads them.
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
