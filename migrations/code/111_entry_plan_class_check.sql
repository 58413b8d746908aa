-- object: function idem.entry_plan_class_check(bigint)
-- entry_plan_class_check checks an entry plan's classes (counts.classes),
-- record or import, against what the plan cites, with the classes as they
-- are now (idem.entry_citation_problem), IX343 naming the first class
-- that fails: when an import plan is sealed, and when any entry plan is
-- approved and when it runs (a class may have become money, or gained a
-- SQL effect, since the plan was made). Internal: granted to nobody.
CREATE OR REPLACE FUNCTION idem.entry_plan_class_check(p_id bigint)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_p       idem.entry_plan;
    v_class   text;
    v_problem text;
BEGIN
    SELECT * INTO v_p FROM idem.entry_plan WHERE id = p_id;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    -- Class by class, each read on its own (op_class is a reference table
    -- on Citus, entry_plan a coordinator-local one: no join between them).
    FOR v_class IN SELECT k FROM jsonb_object_keys(coalesce(v_p.counts -> 'classes', '{}'::jsonb)) k ORDER BY 1 LOOP
        v_problem := idem.entry_citation_problem(v_p.kind, v_class, v_p.contract, v_p.correction);
        CONTINUE WHEN v_problem IS NULL;
        RAISE EXCEPTION 'entry plan % (%): %', p_id, v_p.kind, v_problem
            USING ERRCODE = 'IX343', HINT = format('this plan cannot be approved or run: plan it again (idemctl %s plan) with what it must cite', v_p.kind);
    END LOOP;
END
$$;
