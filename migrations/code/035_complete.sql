-- object: function idem.complete(text, text, jsonb)
-- grant: app, operator
-- complete saves the response of an identity claimed in this transaction
-- (JSON null when response is NULL). Without a claim of this transaction it
-- raises IX005; for a class with a SQL effect, IX013.
CREATE OR REPLACE FUNCTION idem.complete(tenant_id text, operation_id text, response jsonb)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    v_class text;
BEGIN
    -- Only a claim of this transaction is pending (the table is empty at commit).
    DELETE FROM idem.pending_claim p
    WHERE p.tenant_id = complete.tenant_id AND p.operation_id = complete.operation_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'identity (%, %) was not claimed in this transaction', complete.tenant_id, complete.operation_id
            USING ERRCODE = 'IX005',
                  HINT = 'call idem.claim first, in the same transaction';
    END IF;
    -- The class may have been given a SQL effect since the claim. Two
    -- statements, each on one table (a reference table and the tenant's
    -- shard): a delegated call on Citus cannot join them.
    SELECT i.op_class INTO v_class FROM idem.identity i
    WHERE i.tenant_id = complete.tenant_id AND i.operation_id = complete.operation_id;
    IF EXISTS (SELECT 1 FROM idem.op_class c WHERE c.name = v_class AND c.effect IS NOT NULL) THEN
        RAISE EXCEPTION 'identity (%, %): its class has a SQL effect, which only idem.execute runs', complete.tenant_id, complete.operation_id
            USING ERRCODE = 'IX013',
                  HINT = 'claim and complete are for effects in application code; call idem.execute';
    END IF;
    UPDATE idem.inbox_body b
    SET response = coalesce(complete.response, 'null'::jsonb)
    FROM idem.identity i
    WHERE i.tenant_id = complete.tenant_id AND i.operation_id = complete.operation_id
      AND b.tenant_id = i.tenant_id AND b.operation_id = i.operation_id AND b.created_at = i.created_at
      AND b.response IS NULL;
END
$$;
