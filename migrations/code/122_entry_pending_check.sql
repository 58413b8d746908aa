-- object: function idem.entry_pending_check(text, text)
-- grant: operator
-- entry_pending_check refuses (IX341) to let an identity run its effect
-- while an entry plan not yet run (staging, planned, approved or running)
-- holds it as an item still to enter (or, a staged import plan, in its
-- stage: idem.entry_pending_staged), and the inbox does not hold it: that
-- plan enters the outcome known from outside without its effect (a record
-- plan: a charge the provider made that the old store never finished), so
-- running the effect now as well would apply it twice (the plan's run would
-- then find it there and leave it alone). Run the plan first, or abort it.
-- idemctl resolve sends it before the executor in the operation's
-- transaction. Two statements (the plans are a coordinator table on Citus,
-- the identity a distributed one).
CREATE OR REPLACE FUNCTION idem.entry_pending_check(p_tenant text, p_operation text)
RETURNS void
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_plan  bigint;
    v_kind  text;
    v_state text;
BEGIN
    SELECT p.id, p.kind, p.state INTO v_plan, v_kind, v_state
    FROM idem.entry_plan p
    JOIN idem.entry_item e ON e.plan_id = p.id AND e.tenant_id = p_tenant AND e.operation_id = p_operation
    WHERE p.state IN ('staging', 'planned', 'approved', 'running') AND e.outcome IS NULL
    ORDER BY p.id
    LIMIT 1;
    IF v_plan IS NULL THEN -- a staged import plan keeps its rows in its stage
        SELECT s.id, s.kind, s.state INTO v_plan, v_kind, v_state
        FROM idem.entry_pending_staged(ARRAY[p_tenant], ARRAY[p_operation]) s
        ORDER BY s.id
        LIMIT 1;
    END IF;
    IF v_plan IS NULL OR EXISTS (SELECT 1 FROM idem.identity i WHERE i.tenant_id = p_tenant AND i.operation_id = p_operation) THEN
        RETURN;
    END IF;
    RAISE EXCEPTION '% plan % (%) holds (%, %), to enter without its effect: its effect does not run here; run the plan first (idemctl % % %), or abort it',
            v_kind, v_plan, v_state, p_tenant, p_operation, v_kind,
            CASE WHEN v_state IN ('approved', 'running') THEN 'run' ELSE 'approve' END, v_plan
        USING ERRCODE = 'IX341';
END
$$;
