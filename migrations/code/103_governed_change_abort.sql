-- object: function idem.governed_change_abort(bigint, text, text)
-- grant: operator
-- governed_change_abort withdraws a planned governed change (IX331 once it
-- is approved or aborted), with a reason. Any person may abort: stopping a
-- change needs no second pair of eyes. Audited. Returns the change.
CREATE OR REPLACE FUNCTION idem.governed_change_abort(p_id bigint, p_operator text, p_reason text)
RETURNS idem.governed_change
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_person text := idem.require_person('abort a governed change');
    v_c      idem.governed_change := idem.governed_change_lock(p_id);
BEGIN
    PERFORM idem.check_operator(p_operator, 'abort');
    IF idem.text_problem('a reason', p_reason, 4096) IS NOT NULL THEN
        RAISE EXCEPTION 'abort: %', idem.text_problem('a reason', p_reason, 4096)
            USING ERRCODE = 'IX306', HINT = 'pass --reason';
    END IF;
    IF v_c.state <> 'planned' THEN
        RAISE EXCEPTION 'governed change % is %, not planned', v_c.id, v_c.state USING ERRCODE = 'IX331';
    END IF;
    UPDATE idem.governed_change
    SET state = 'aborted', aborted_at = now(), aborted_by = p_operator, abort_reason = p_reason
    WHERE id = p_id
    RETURNING * INTO v_c;
    PERFORM idem.audit_write(p_operator, 'governed_change.abort', 'governed_change:' || p_id,
        jsonb_build_object('kind', v_c.kind, 'target', v_c.target, 'reason', p_reason, 'person', v_person)::text);
    RETURN v_c;
END
$$;
