-- object: function idem.execute(text, text, text, text, text, jsonb)
-- grant: app, operator
-- execute is the atomic executor: claim the identity, run the class's SQL
-- effect, save its response, all in the caller's transaction. The payload is
-- the caller's canonical JSON text and payload_hash its jcs-sha256 hash, which
-- the database recomputes (IX010 on a mismatch, nothing written, on every
-- path). Outcomes:
--   applied          the identity was new: the effect ran, its response is saved;
--   already_applied  same identity, same hash and class: the saved response;
--   purged           applied once, its body purged under a proven horizon;
--   conflict         another hash or class: nothing ran; the conflict is in
--                    idem.quarantine (quarantine_id) as part of the caller's
--                    transaction: commit it.
-- An effect that raises fails the whole call and leaves no inbox row.
CREATE OR REPLACE FUNCTION idem.execute(
    tenant_id text, operation_id text, op_class text, payload text, payload_hash text, transport jsonb DEFAULT NULL
) RETURNS TABLE (outcome text, response jsonb, quarantine_id bigint)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    v_effect regprocedure;
    v_settle record;
BEGIN
    v_effect := idem.check_request(tenant_id, operation_id, op_class, payload, payload_hash, transport);
    IF v_effect IS NULL THEN
        RAISE EXCEPTION 'class % has its effect in application code', op_class
            USING ERRCODE = 'IX004',
                  HINT = 'call idem.claim, run the effect, then idem.complete in one transaction';
    END IF;
    v_settle := idem.settle(tenant_id, operation_id, op_class, payload, payload_hash, transport, false);
    IF v_settle.outcome <> 'claimed' THEN
        outcome := v_settle.outcome;
        response := v_settle.response;
        quarantine_id := v_settle.quarantine_id;
        RETURN NEXT;
        RETURN;
    END IF;
    response := coalesce(idem.run_effect(op_class, tenant_id, operation_id, payload::jsonb), 'null'::jsonb);
    INSERT INTO idem.inbox_body (tenant_id, operation_id, created_at, op_class, payload, response, transport)
    VALUES (execute.tenant_id, execute.operation_id, now(), execute.op_class, execute.payload, execute.response,
            execute.transport);
    outcome := 'applied';
    RETURN NEXT;
END
$$;
