-- object: function idem.quarantine_bulk_accept_run(bigint, text, integer)
-- grant: operator
-- quarantine_bulk_accept_run runs the next p_batch (1-1000) records of an
-- approved bulk accept-as-new plan, in id order after done_through, in the
-- caller's transaction: each open record runs once under the rule's new id
-- (idem.quarantine_accept_record, with its own audit row naming the plan and
-- the approver); a record decided meanwhile is skipped. When no record is
-- left the plan is done. A new id that holds another payload (IX106) rolls
-- the whole batch back. Only a person may run it (IX313); only an approved
-- or running plan runs (IX121). Returns one row per record handled.
CREATE OR REPLACE FUNCTION idem.quarantine_bulk_accept_run(p_plan bigint, p_operator text, p_batch integer)
RETURNS TABLE (id bigint, outcome text, new_operation_id text, audit_id bigint)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_person   text := idem.require_person('run a bulk accept-as-new');
    v_p        idem.quarantine_bulk_accept;
    v_id       bigint;
    v_q        idem.quarantine;
    v_new      text;
    v_r        record;
    v_last     bigint;
    v_accepted integer := 0;
    v_skipped  integer := 0;
BEGIN
    PERFORM idem.check_operator(p_operator, 'run a bulk accept-as-new');
    IF p_batch IS NULL OR p_batch < 1 OR p_batch > 1000 THEN
        RAISE EXCEPTION 'bulk accept-as-new: a batch is 1 to 1000 records, not %', coalesce(p_batch::text, 'NULL')
            USING ERRCODE = 'IX108';
    END IF;
    v_p := idem.quarantine_bulk_accept_lock(p_plan);
    IF v_p.state NOT IN ('approved', 'running') THEN
        RAISE EXCEPTION 'bulk accept-as-new plan % is %: only an approved plan runs', v_p.id, v_p.state
            USING ERRCODE = 'IX121',
                  HINT = CASE WHEN v_p.state = 'planned' THEN 'another person approves it first: idemctl quarantine bulk approve'
                              ELSE 'nothing was run' END;
    END IF;
    v_last := v_p.done_through;
    FOR v_id IN SELECT u FROM unnest(v_p.ids) u WHERE u > v_p.done_through ORDER BY u LIMIT p_batch LOOP
        v_q := idem.quarantine_lock(v_id);
        IF v_q.status <> 'open' THEN
            v_skipped := v_skipped + 1;
            RETURN QUERY SELECT v_id, 'already_' || v_q.status, v_q.new_operation_id, v_q.decision_audit_id;
        ELSE
            v_new := replace(v_p.rule, '{operation_id}', v_q.operation_id);
            SELECT * INTO v_r FROM idem.quarantine_accept_record(v_q, v_new, p_operator, v_p.reason,
                jsonb_build_object('bulk_accept_plan', v_p.id, 'planned_person', v_p.planned_person,
                                   'approved_person', v_p.approved_person));
            v_accepted := v_accepted + 1;
            RETURN QUERY SELECT v_id, v_r.outcome, v_new, v_r.audit_id;
        END IF;
        v_last := v_id;
    END LOOP;
    UPDATE idem.quarantine_bulk_accept b
    SET state = CASE WHEN v_last >= (SELECT max(u) FROM unnest(v_p.ids) u) THEN 'done' ELSE 'running' END,
        started_at = coalesce(b.started_at, now()),
        finished_at = CASE WHEN v_last >= (SELECT max(u) FROM unnest(v_p.ids) u) THEN now() END,
        done_through = v_last, accepted = b.accepted + v_accepted, skipped = b.skipped + v_skipped
    WHERE b.id = v_p.id;
END
$$;
