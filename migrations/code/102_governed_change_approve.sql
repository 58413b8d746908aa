-- object: function idem.governed_change_approve(bigint, text)
-- grant: operator
-- governed_change_approve is the second pair of eyes on a governed change
-- (idem.four_eyes_approve: another person than the planner's, IX332; a login
-- with no person, IX313; only a planned change, IX331), and applies it in the
-- same transaction: a money declaration is changed or removed, a replay
-- source is removed, a forever class becomes horizon (with its min-age), a
-- class's min-age is lowered, a manual correction is marked done (by the
-- planner's label; it then pins nothing). A target that changed since the change was planned is
-- refused (IX333: plan again). Returns the change.
CREATE OR REPLACE FUNCTION idem.governed_change_approve(p_id bigint, p_operator text)
RETURNS idem.governed_change
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_c      idem.governed_change := idem.governed_change_lock(p_id);
    v_person text;
    v_now    jsonb;
    v_src    idem.horizon_source;
    v_class  idem.op_class;
    v_corr   idem.horizon_correction;
BEGIN
    v_person := idem.four_eyes_approve('idem.governed_change', to_jsonb(v_c), 'governed change', p_operator,
                                       'governed_change.approve',
                                       jsonb_build_object('kind', v_c.kind, 'target', v_c.target),
                                       ARRAY['IX331', 'IX332']);
    IF v_c.kind = 'class_money' THEN
        SELECT money INTO v_now FROM idem.op_class WHERE name = v_c.target FOR UPDATE;
        IF NOT FOUND OR v_now IS DISTINCT FROM v_c.before THEN
            RAISE EXCEPTION 'class %: its money declaration changed since change % was planned', v_c.target, v_c.id
                USING ERRCODE = 'IX333', HINT = 'abort it and plan again';
        END IF;
        UPDATE idem.op_class SET money = v_c.after WHERE name = v_c.target;
        PERFORM idem.audit_write(p_operator, 'class.money.set', 'class:' || v_c.target,
            jsonb_build_object('before', v_c.before, 'after', v_c.after, 'reason', v_c.reason, 'change', v_c.id,
                               'person', v_person, 'planned_person', v_c.planned_person)::text);
    ELSIF v_c.kind IN ('class_retention', 'class_min_age') THEN
        SELECT * INTO v_class FROM idem.op_class WHERE name = v_c.target FOR UPDATE;
        IF NOT FOUND OR jsonb_build_object('retention', v_class.retention, 'min_age_seconds',
                                           extract(epoch FROM v_class.min_age)) IS DISTINCT FROM v_c.before THEN
            RAISE EXCEPTION 'class %: its retention or min-age changed since change % was planned', v_c.target, v_c.id
                USING ERRCODE = 'IX333', HINT = 'abort it and plan again';
        END IF;
        UPDATE idem.op_class
        SET retention = v_c.after ->> 'retention',
            min_age = justify_hours(make_interval(secs => (v_c.after ->> 'min_age_seconds')::float8)) -- 1 day, not 24:00:00
        WHERE name = v_c.target;
        PERFORM idem.audit_write(p_operator, 'horizon.class.set', 'class:' || v_c.target,
            jsonb_build_object('before', v_c.before, 'after', v_c.after, 'reason', v_c.reason, 'change', v_c.id,
                               'person', v_person, 'planned_person', v_c.planned_person)::text);
    ELSIF v_c.kind = 'correction_done' THEN
        UPDATE idem.horizon_correction SET done_at = now(), done_by = v_c.planned_by
        WHERE id = v_c.target::bigint AND done_at IS NULL
        RETURNING * INTO v_corr;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'correction %: it is no longer pending since change % was planned', v_c.target, v_c.id
                USING ERRCODE = 'IX333', HINT = 'abort it';
        END IF;
        PERFORM idem.audit_write(p_operator, 'horizon.correction.done', 'correction:' || v_corr.id,
            (to_jsonb(v_corr) || jsonb_build_object('change', v_c.id, 'person', v_person,
                                                    'planned_person', v_c.planned_person))::text);
    ELSE
        DELETE FROM idem.horizon_source WHERE name = v_c.target RETURNING * INTO v_src;
        IF NOT FOUND OR jsonb_build_object('kind', v_src.kind, 'config', v_src.config) IS DISTINCT FROM v_c.before THEN
            RAISE EXCEPTION 'source %: it changed since change % was planned', v_c.target, v_c.id
                USING ERRCODE = 'IX333', HINT = 'abort it and plan again';
        END IF;
        PERFORM idem.audit_write(p_operator, 'horizon.source.remove', 'horizon_source:' || v_c.target,
            jsonb_build_object('name', v_c.target, 'kind', v_src.kind, 'config', v_src.config, 'change', v_c.id,
                               'reason', v_c.reason, 'person', v_person, 'planned_person', v_c.planned_person)::text);
    END IF;
    SELECT * INTO v_c FROM idem.governed_change WHERE id = p_id;
    RETURN v_c;
END
$$;
