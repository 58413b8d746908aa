-- object: function idem.class_set(text, text, interval, boolean, text, text)
-- grant: operator
-- class_set changes a class's retention and, when p_set_min_age, its min-age
-- floor (NULL for none), and records the change with its before and after.
-- Two changes weaken a proof and need a reason (IX306) and a person (IX313):
-- making a forever class (money) horizon lets purges remove it without a
-- business contract (kind class_retention), and lowering or removing the
-- min-age lets a purge reach identities the floor protected (kind
-- class_min_age). Each is planned as a governed change, with the retention
-- and min-age asked for, that another person approves
-- (idem.governed_change_approve applies it). Any other change (raising the
-- floor among them) applies at once. Returns whether it was applied, and
-- the change planned otherwise.
CREATE OR REPLACE FUNCTION idem.class_set(
    p_name text, p_retention text, p_min_age interval, p_set_min_age boolean, p_operator text, p_reason text
) RETURNS TABLE (applied boolean, change_id bigint)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_old    idem.op_class;
    v_new    idem.op_class;
    v_person text;
    v_c      idem.governed_change;
    v_min    interval;
    v_kind   text;
BEGIN
    PERFORM idem.check_operator(p_operator, 'class set');
    IF p_reason IS NOT NULL AND idem.text_problem('a reason', p_reason, 4096) IS NOT NULL THEN
        RAISE EXCEPTION 'class set: %', idem.text_problem('a reason', p_reason, 4096) USING ERRCODE = 'IX306';
    END IF;
    IF p_retention IS NULL OR p_retention NOT IN ('forever', 'horizon') THEN
        RAISE EXCEPTION 'retention %: use forever or horizon', coalesce(quote_literal(p_retention), 'NULL') USING ERRCODE = 'IX306';
    END IF;
    IF p_set_min_age AND p_min_age < interval '0' THEN
        RAISE EXCEPTION 'min-age must not be negative' USING ERRCODE = 'IX306';
    END IF;
    SELECT * INTO v_old FROM idem.op_class WHERE name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown operation class %', quote_literal(p_name)
            USING ERRCODE = 'IX003', HINT = 'idemctl class list shows them';
    END IF;
    -- as days and hours (1 day, not 24:00:00), as psql and the audit show it
    v_min := CASE WHEN p_set_min_age THEN justify_hours(p_min_age) ELSE v_old.min_age END;
    v_kind := CASE WHEN v_old.retention = 'forever' AND p_retention = 'horizon' THEN 'class_retention'
                   WHEN coalesce(v_min, interval '0') < coalesce(v_old.min_age, interval '0') THEN 'class_min_age' END;
    IF v_kind = 'class_retention' AND idem.text_problem('a reason', p_reason, 4096) IS NOT NULL THEN
        RAISE EXCEPTION 'class % is forever (money): making it purgeable by horizon alone needs a reason: %', p_name,
                idem.text_problem('a reason', p_reason, 4096)
            USING ERRCODE = 'IX306', HINT = 'pass --reason';
    END IF;
    IF v_kind = 'class_min_age' AND idem.text_problem('a reason', p_reason, 4096) IS NOT NULL THEN
        RAISE EXCEPTION 'class %: lowering its min-age lets purges reach younger identities; it needs a reason: %', p_name,
                idem.text_problem('a reason', p_reason, 4096)
            USING ERRCODE = 'IX306', HINT = 'pass --reason';
    END IF;
    IF v_kind IS NOT NULL THEN
        v_person := idem.require_person(CASE v_kind WHEN 'class_retention' THEN 'make a forever class (money) horizon'
                                                    ELSE 'lower a class''s min-age' END);
        INSERT INTO idem.governed_change (kind, target, before, after, reason, planned_by, planned_person, planned_db_user)
        VALUES (v_kind, p_name,
                jsonb_build_object('retention', v_old.retention, 'min_age_seconds', extract(epoch FROM v_old.min_age)),
                jsonb_build_object('retention', p_retention, 'min_age_seconds', extract(epoch FROM v_min)),
                p_reason, p_operator, v_person, session_user)
        RETURNING * INTO v_c;
        PERFORM idem.audit_write(p_operator, 'governed_change.plan', 'governed_change:' || v_c.id,
            jsonb_build_object('kind', v_c.kind, 'target', p_name, 'before', v_c.before, 'after', v_c.after,
                               'reason', p_reason, 'person', v_person)::text);
        RETURN QUERY SELECT false, v_c.id;
        RETURN;
    END IF;
    UPDATE idem.op_class
    SET retention = p_retention, min_age = v_min
    WHERE name = p_name
    RETURNING * INTO v_new;
    PERFORM idem.audit_write(p_operator, 'horizon.class.set', 'class:' || p_name, jsonb_build_object(
        'before', jsonb_build_object('retention', v_old.retention, 'min_age_seconds', extract(epoch FROM v_old.min_age)),
        'after', jsonb_build_object('retention', v_new.retention, 'min_age_seconds', extract(epoch FROM v_new.min_age)),
        'reason', p_reason)::text);
    RETURN QUERY SELECT true, NULL::bigint;
END
$$;
