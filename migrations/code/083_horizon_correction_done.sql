-- object: function idem.horizon_correction_done(bigint, text)
-- grant: operator
-- horizon_correction_done says a pending manual correction was applied.
-- Once done it no longer pins its identity: purge proofs made afterwards
-- leave it out, which weakens them. So it is a governed change (kind
-- correction_done) that one person plans here and another person approves
-- (idem.governed_change_approve marks the correction done). The login must
-- map to a person (IX313); an unknown or already done correction is IX309,
-- one whose marking already waits for approval IX331. Audited. Returns the
-- planned change.
CREATE OR REPLACE FUNCTION idem.horizon_correction_done(p_id bigint, p_operator text)
RETURNS idem.governed_change
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_person text := idem.require_person('mark a manual correction applied');
    v_row    idem.horizon_correction;
    v_c      idem.governed_change;
BEGIN
    PERFORM idem.check_operator(p_operator, 'finish correction');
    SELECT * INTO v_row FROM idem.horizon_correction WHERE id = p_id AND done_at IS NULL FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no pending correction %', coalesce(p_id::text, 'NULL')
            USING ERRCODE = 'IX309', HINT = 'idemctl corrections list shows the pending ones';
    END IF;
    SELECT * INTO v_c FROM idem.governed_change
    WHERE kind = 'correction_done' AND target = p_id::text AND state = 'planned';
    IF FOUND THEN
        RAISE EXCEPTION 'correction % is already marked applied by change %, which waits for another person', p_id, v_c.id
            USING ERRCODE = 'IX331', HINT = format('another person approves it: idemctl change approve %s', v_c.id);
    END IF;
    INSERT INTO idem.governed_change (kind, target, before, after, reason, planned_by, planned_person, planned_db_user)
    VALUES ('correction_done', p_id::text,
            jsonb_build_object('tenant_id', v_row.tenant_id, 'operation_id', v_row.operation_id, 'done', false),
            jsonb_build_object('tenant_id', v_row.tenant_id, 'operation_id', v_row.operation_id, 'done', true),
            left(format('correction %s applied (it was: %s)', p_id, v_row.reason), 4096),
            p_operator, v_person, session_user)
    RETURNING * INTO v_c;
    PERFORM idem.audit_write(p_operator, 'governed_change.plan', 'governed_change:' || v_c.id,
        jsonb_build_object('kind', v_c.kind, 'target', v_c.target, 'before', v_c.before, 'after', v_c.after,
                           'reason', v_c.reason, 'person', v_person)::text);
    RETURN v_c;
END
$$;
