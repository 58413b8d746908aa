-- object: function idem.effect_owner_at_plan(text, text, name)
-- effect_owner_at_plan is the half of the per-call effect check that reads
-- pg_proc, done once a plan instead of once a call. idem.run_effect's
-- generated expression for a class names it with constant arguments beside
-- the call of the effect itself; declared IMMUTABLE, it is evaluated when
-- the planner folds constants (once per backend and plan), and PostgreSQL
-- plans that call a function again whenever that function's pg_proc row
-- changes or it is dropped (CREATE OR REPLACE, ALTER FUNCTION of its
-- security, search_path, owner, name or rights, DROP): every such change
-- makes the next call fold it again. It returns the effect's owner when
-- idem.effect_problem accepts the effect, else the current user's own OID,
-- which the per-call half (the owner's memberships and attributes, which no
-- plan follows) never accepts, so the call goes to idem.effect_recheck,
-- which names the problem (IX016). Internal: nothing but the dispatcher's
-- plans may call it, and it must not be declared anything but IMMUTABLE.
CREATE OR REPLACE FUNCTION idem.effect_owner_at_plan(p_effect text, p_nsp text, p_name name)
RETURNS oid
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v_fn oid := pg_catalog.to_regprocedure(p_effect);
BEGIN
    IF v_fn IS NOT NULL AND idem.effect_problem(v_fn, pg_catalog.to_regnamespace(p_nsp), p_name) IS NULL THEN
        RETURN (SELECT p.proowner FROM pg_catalog.pg_proc p WHERE p.oid = v_fn);
    END IF;
    RETURN (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = current_user);
END
$$;
