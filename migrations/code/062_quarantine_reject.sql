-- object: function idem.quarantine_reject(bigint, text, text)
-- grant: operator
-- quarantine_reject decides that the conflicting request must never run: the
-- record stays (and keeps holding the stored side's evidence), replays of that
-- payload keep being refused and counted. The decision and its audit row are
-- written here, in the caller's transaction. Returns the audit row id.
CREATE OR REPLACE FUNCTION idem.quarantine_reject(p_id bigint, p_operator text, p_reason text)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_problem text := idem.decision_input_problem(p_operator, p_reason);
BEGIN
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'reject quarantine record %: %', coalesce(p_id::text, 'NULL'), v_problem
            USING ERRCODE = 'IX104', HINT = 'pass --reason and --operator (or set IDEMCTL_OPERATOR)';
    END IF;
    RETURN idem.quarantine_reject_record(idem.quarantine_lock_open(p_id), p_operator, p_reason, NULL);
END
$$;
