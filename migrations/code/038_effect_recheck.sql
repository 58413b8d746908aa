-- object: function idem.effect_recheck(text, text, text, name)
-- effect_recheck is what idem.run_effect calls when its per-call check does
-- not accept a class's effect: idem.effect_problem decides on the effect as
-- it is now and names the problem (IX016, nothing runs), or accepts it (an
-- owner whose membership was revoked since the plan was made, a pinned
-- search_path changed to another), and the dispatcher then calls it.
CREATE OR REPLACE FUNCTION idem.effect_recheck(p_op_class text, p_effect text, p_nsp text, p_name name)
RETURNS boolean
LANGUAGE plpgsql
AS $$
DECLARE
    v_fn      oid := pg_catalog.to_regprocedure(p_effect);
    v_problem text;
BEGIN
    IF v_fn IS NULL THEN
        v_problem := 'is no longer in the database (dropped, or dropped and created again): register the class again';
    ELSE
        v_problem := idem.effect_problem(v_fn, pg_catalog.to_regnamespace(p_nsp), p_name);
    END IF;
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'class %: effect %: %', p_op_class, p_effect, v_problem USING ERRCODE = 'IX016',
            HINT = 'nothing ran; the schema owner checks it with idemctl doctor and registers it again once it passes';
    END IF;
    RETURN true;
END
$$;
