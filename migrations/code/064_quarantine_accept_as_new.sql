-- object: function idem.quarantine_accept_as_new(bigint, text, text, text)
-- grant: operator
-- quarantine_accept_as_new decides that the incoming payload is a legitimate
-- new operation (a settlement revision, a corrected amount) and runs it,
-- through idem.execute, under (tenant_id, p_new_operation_id) with the
-- incoming class, canonical payload and hash, in the caller's transaction
-- (idem.quarantine_accept_record: applied, already_applied, or IX106 with
-- nothing run or recorded). The decision and its audit row are written there.
-- A record whose incoming class moves money (op_class.money) is refused
-- (IX125): running it again may charge twice, so it needs a second person:
-- a plan of one record (idem.quarantine_bulk_accept_plan) that another
-- person approves. A record whose incoming side an import brought (the old
-- store finished it: idem.quarantine_import_refusal) is refused (IX128)
-- before anything, money or not: reject it, or record a really new
-- operation by hand.
CREATE OR REPLACE FUNCTION idem.quarantine_accept_as_new(
    p_id bigint, p_new_operation_id text, p_operator text, p_reason text
) RETURNS TABLE (outcome text, response jsonb, audit_id bigint)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_problem text := idem.decision_input_problem(p_operator, p_reason);
    v_q       idem.quarantine;
    v_refusal text;
BEGIN
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'accept quarantine record % as new: %', coalesce(p_id::text, 'NULL'), v_problem
            USING ERRCODE = 'IX104', HINT = 'pass --reason and --operator (or set IDEMCTL_OPERATOR)';
    END IF;
    v_q := idem.quarantine_lock_open(p_id);
    v_refusal := idem.quarantine_import_refusal(v_q.incoming_transport);
    IF v_refusal IS NOT NULL THEN
        RAISE EXCEPTION 'quarantine record %: %', p_id, v_refusal
            USING ERRCODE = 'IX128',
                  HINT = format('reject it (idemctl quarantine reject %s --reason TEXT); if it really is a new operation, record it by hand (idemctl record plan)', p_id);
    END IF;
    IF EXISTS (SELECT 1 FROM idem.op_class WHERE name = v_q.incoming_class AND money IS NOT NULL) THEN
        RAISE EXCEPTION 'quarantine record %: class % moves money: accepting it as new needs a second person', p_id,
                v_q.incoming_class
            USING ERRCODE = 'IX125',
                  HINT = 'plan it (idemctl quarantine accept-as-new plans it for you); another person approves the plan';
    END IF;
    RETURN QUERY SELECT r.outcome, r.response, r.audit_id
        FROM idem.quarantine_accept_record(v_q, p_new_operation_id, p_operator, p_reason, NULL) r;
END
$$;
