-- object: function idem.horizon_source_remove(text, text, text)
-- grant: operator
-- horizon_source_remove plans forgetting a replay source (IX308 when there
-- is none, or for the built-in source manual, which is no row of
-- idem.horizon_source: its corrections leave it when done): a purge plan made without it would prove the horizon without
-- it, so the removal is a governed change that another person approves
-- (idem.governed_change_approve removes the source then). Needs a reason
-- (IX306) and a person behind the login (IX313). Audited. Returns the
-- change.
CREATE OR REPLACE FUNCTION idem.horizon_source_remove(p_name text, p_operator text, p_reason text)
RETURNS idem.governed_change
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_person text := idem.require_person('remove a replay source');
    v_row    idem.horizon_source;
    v_c      idem.governed_change;
BEGIN
    PERFORM idem.check_operator(p_operator, 'remove source');
    IF idem.text_problem('a reason', p_reason, 4096) IS NOT NULL THEN
        RAISE EXCEPTION 'remove source: %', idem.text_problem('a reason', p_reason, 4096)
            USING ERRCODE = 'IX306', HINT = 'pass --reason';
    END IF;
    IF p_name = 'manual' THEN
        RAISE EXCEPTION 'source manual is built in (the pending manual corrections) and cannot be removed'
            USING ERRCODE = 'IX308', HINT = 'a correction leaves it when marked done: idemctl corrections done ID';
    END IF;
    SELECT * INTO v_row FROM idem.horizon_source WHERE name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no source %', coalesce(quote_literal(p_name), 'NULL')
            USING ERRCODE = 'IX308', HINT = 'idemctl horizon source list shows them';
    END IF;
    INSERT INTO idem.governed_change (kind, target, before, after, reason, planned_by, planned_person, planned_db_user)
    VALUES ('source_remove', p_name, jsonb_build_object('kind', v_row.kind, 'config', v_row.config), NULL, p_reason,
            p_operator, v_person, session_user)
    RETURNING * INTO v_c;
    PERFORM idem.audit_write(p_operator, 'governed_change.plan', 'governed_change:' || v_c.id,
        jsonb_build_object('kind', v_c.kind, 'target', p_name, 'before', v_c.before, 'reason', p_reason,
                           'person', v_person)::text);
    RETURN v_c;
END
$$;
