-- object: function idem.quarantine_accept_clashes(bigint[], text)
-- grant: operator, auditor
-- quarantine_accept_clashes lists the open records of p_ids that cannot run
-- as new operations under p_rule ({operation_id} replaced by the record's
-- operation id; without it, the new id itself): the new identity is already
-- held by another payload or class (accepting would be refused, IX106), or
-- an earlier record of the same set takes the same new id with another
-- payload. Accepting a record whose new identity holds this very payload is
-- no clash: it is linked, not run again. The plan and its approval refuse a
-- set with a clash (idem.quarantine_bulk_accept_plan, _approve); previews
-- and reviews name them. One row per clashing record, in id order.
CREATE OR REPLACE FUNCTION idem.quarantine_accept_clashes(p_ids bigint[], p_rule text)
RETURNS TABLE (id bigint, tenant_id text, operation_id text, new_operation_id text, problem text)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_held bigint[] := '{}';
    r      record;
BEGIN
    -- Two statements, each one inner join co-located by tenant_id (one
    -- shard's work on Citus, which plans no union of the two): a record
    -- whose new id is held in the inbox first, then one whose new id is
    -- also another record's new id, with another payload.
    FOR r IN
        SELECT q.id, q.tenant_id, q.operation_id, i.operation_id AS new_id,
               format('new operation id %s is already held by another %s (since %s)', quote_literal(i.operation_id),
                      CASE WHEN i.op_class <> q.incoming_class THEN 'class (' || i.op_class || ')' ELSE 'payload' END,
                      to_char(i.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS"Z"')) AS problem
        FROM idem.quarantine q
        JOIN idem.identity i
          ON i.tenant_id = q.tenant_id AND i.operation_id = replace(p_rule, '{operation_id}', q.operation_id)
        WHERE q.id = ANY (p_ids) AND q.status = 'open'
          AND (i.payload_digest <> decode(substr(q.incoming_hash, 12), 'hex') OR i.op_class <> q.incoming_class)
    LOOP
        v_held := v_held || r.id;
        id := r.id; tenant_id := r.tenant_id; operation_id := r.operation_id;
        new_operation_id := r.new_id; problem := r.problem;
        RETURN NEXT;
    END LOOP;
    RETURN QUERY
        SELECT q.id, q.tenant_id, q.operation_id, replace(p_rule, '{operation_id}', q.operation_id),
               format('new operation id %s is also the new id of record %s, with another payload',
                      quote_literal(replace(p_rule, '{operation_id}', q.operation_id)), min(o.id))
        FROM idem.quarantine q
        JOIN idem.quarantine o
          ON o.tenant_id = q.tenant_id
         AND replace(p_rule, '{operation_id}', o.operation_id) = replace(p_rule, '{operation_id}', q.operation_id)
        WHERE q.id = ANY (p_ids) AND q.status = 'open' AND o.id = ANY (p_ids) AND o.status = 'open' AND o.id < q.id
          AND (o.incoming_hash <> q.incoming_hash OR o.incoming_class <> q.incoming_class)
          AND q.id <> ALL (v_held)
        GROUP BY q.id, q.tenant_id, q.operation_id;
END
$$;
