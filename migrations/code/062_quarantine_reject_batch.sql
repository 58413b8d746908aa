-- object: function idem.quarantine_reject_batch(bigint[], text, text, text)
-- grant: operator
-- quarantine_reject_batch is a bulk reject's step: it decides each open record
-- of p_ids (at most 1000) with one reason, each with its own audit row (whose
-- details carry p_run, the label that ties a bulk run's rows together), in the
-- caller's transaction. A record already decided, by this run before it was
-- interrupted or by someone else, is left as it is and reported, never
-- decided twice; so a rerun of an interrupted bulk reject finishes it. Rows
-- are locked in id order, so two bulk runs over the same records queue
-- instead of deadlocking. Returns one row per distinct id: rejected (with its
-- audit row), already_rejected, already_accepted or not_found.
CREATE OR REPLACE FUNCTION idem.quarantine_reject_batch(p_ids bigint[], p_operator text, p_reason text, p_run text)
RETURNS TABLE (id bigint, outcome text, audit_id bigint)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_problem text := coalesce(idem.decision_input_problem(p_operator, p_reason),
                               idem.text_problem('the bulk run label', p_run, 128));
    v_id      bigint;
    v_q       idem.quarantine;
BEGIN
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'bulk reject: %', v_problem
            USING ERRCODE = 'IX104', HINT = 'pass --reason and --operator (or set IDEMCTL_OPERATOR)';
    END IF;
    IF p_ids IS NULL OR cardinality(p_ids) = 0 OR cardinality(p_ids) > 1000 THEN
        RAISE EXCEPTION 'bulk reject: a batch holds 1 to 1000 record ids, not %', coalesce(cardinality(p_ids), 0)
            USING ERRCODE = 'IX108', HINT = 'idemctl quarantine reject splits the work into batches';
    END IF;
    FOR v_id IN SELECT DISTINCT u FROM unnest(p_ids) u ORDER BY u LOOP
        v_q := idem.quarantine_lock(v_id);
        IF v_q.id IS NULL THEN
            RETURN QUERY SELECT v_id, 'not_found'::text, NULL::bigint;
        ELSIF v_q.status <> 'open' THEN
            RETURN QUERY SELECT v_id, 'already_' || v_q.status, v_q.decision_audit_id;
        ELSE
            RETURN QUERY SELECT v_id, 'rejected'::text,
                idem.quarantine_reject_record(v_q, p_operator, p_reason, jsonb_build_object('bulk_run', p_run));
        END IF;
    END LOOP;
END
$$;
