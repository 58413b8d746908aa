-- object: function idem.entry_plan_class_check(bigint)
-- entry_plan_class_check checks a record plan's items against their classes
-- as they are now, when the plan is approved and when it runs: a class may
-- have become money (it then needs the plan's contract) or gained a SQL
-- effect (it then needs the plan's correction) after the plan was made,
-- IX343 as at idem.entry_plan_create. An import plan is left alone (it
-- adopts effects that already ran elsewhere). Internal: granted to nobody.
CREATE OR REPLACE FUNCTION idem.entry_plan_class_check(p_id bigint)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_p idem.entry_plan;
    v_i record;
BEGIN
    SELECT * INTO v_p FROM idem.entry_plan WHERE id = p_id;
    IF NOT FOUND OR v_p.kind <> 'record' THEN
        RETURN;
    END IF;
    SELECT e.seq, e.op_class, c.money IS NOT NULL AS money, c.effect IS NOT NULL AS effect INTO v_i
    FROM idem.entry_item e JOIN idem.op_class c ON c.name = e.op_class
    WHERE e.plan_id = p_id AND ((c.money IS NOT NULL AND v_p.contract IS NULL)
                                OR (c.effect IS NOT NULL AND v_p.correction IS NULL))
    ORDER BY e.seq LIMIT 1;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF v_i.money AND v_p.contract IS NULL THEN
        RAISE EXCEPTION 'entry plan %: item % is of class %, which moves money since the plan was made: it needs a business contract (plan again with --contract)',
                p_id, v_i.seq, v_i.op_class
            USING ERRCODE = 'IX343', HINT = 'this plan cannot run: plan again with --contract';
    END IF;
    RAISE EXCEPTION 'entry plan %: item %: class % has a SQL effect since the plan was made: name the manual correction that writes its ledger rows (plan again with --correction)',
            p_id, v_i.seq, v_i.op_class
        USING ERRCODE = 'IX343', HINT = 'this plan cannot run: plan again with --correction';
END
$$;
