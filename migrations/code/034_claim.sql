-- object: function idem.claim(text, text, text, text, text, jsonb)
-- grant: app, operator
-- claim checks a request and claims its identity (see idem.settle): the entry
-- point for effects that run in application code. Claim, run the effect in
-- the same transaction, then idem.complete; a commit without complete is
-- refused (IX009). A class with a SQL effect is refused (IX013): only
-- idem.execute records its identity, with its effect. Outcomes: claimed,
-- already_applied, purged, conflict.
CREATE OR REPLACE FUNCTION idem.claim(
    tenant_id text, operation_id text, op_class text, payload text, payload_hash text, transport jsonb DEFAULT NULL
) RETURNS TABLE (outcome text, response jsonb, quarantine_id bigint)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    v_settle record;
BEGIN
    IF idem.check_request(tenant_id, operation_id, op_class, payload, payload_hash, transport) IS NOT NULL THEN
        RAISE EXCEPTION 'class % has a SQL effect: idem.execute runs it with its identity', op_class
            USING ERRCODE = 'IX013',
                  HINT = 'claim and complete are for effects in application code; call idem.execute';
    END IF;
    v_settle := idem.settle(tenant_id, operation_id, op_class, payload, payload_hash, transport, true);
    IF v_settle.outcome = 'claimed' THEN
        INSERT INTO idem.pending_claim (tenant_id, operation_id) VALUES (claim.tenant_id, claim.operation_id);
    END IF;
    outcome := v_settle.outcome;
    response := v_settle.response;
    quarantine_id := v_settle.quarantine_id;
    RETURN NEXT;
END
$$;
