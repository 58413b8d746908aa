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
    v_p      idem.entry_plan;
    v_class  text;
    v_money  boolean;
    v_effect boolean;
    v_seq    integer;
BEGIN
    SELECT * INTO v_p FROM idem.entry_plan WHERE id = p_id;
    IF NOT FOUND OR v_p.kind <> 'record' THEN
        RETURN;
    END IF;
    -- Class by class, each read on its own (op_class is a reference table
    -- on Citus, entry_item a coordinator-local one: no join between them).
    FOR v_class IN SELECT DISTINCT op_class FROM idem.entry_item WHERE plan_id = p_id ORDER BY 1 LOOP
        SELECT c.money IS NOT NULL, c.effect IS NOT NULL INTO v_money, v_effect FROM idem.op_class c WHERE c.name = v_class;
        CONTINUE WHEN NOT ((v_money AND v_p.contract IS NULL) OR (v_effect AND v_p.correction IS NULL));
        SELECT min(seq) INTO v_seq FROM idem.entry_item WHERE plan_id = p_id AND op_class = v_class;
        IF v_money AND v_p.contract IS NULL THEN
            RAISE EXCEPTION 'entry plan %: item % is of class %, which moves money since the plan was made: it needs a business contract (plan again with --contract)',
                    p_id, v_seq, v_class
                USING ERRCODE = 'IX343', HINT = 'this plan cannot run: plan again with --contract';
        END IF;
        RAISE EXCEPTION 'entry plan %: item %: class % has a SQL effect since the plan was made: name the manual correction that writes its ledger rows (plan again with --correction)',
                p_id, v_seq, v_class
            USING ERRCODE = 'IX343', HINT = 'this plan cannot run: plan again with --correction';
    END LOOP;
END
$$;
