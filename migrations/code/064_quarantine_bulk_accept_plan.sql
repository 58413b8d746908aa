-- object: function idem.quarantine_bulk_accept_plan(bigint[], text, integer, text, text, jsonb)
-- grant: operator
-- quarantine_bulk_accept_plan plans accepting many records as new operations:
-- the records (p_ids, every one open, at most p_max), the rule naming each new
-- operation ({operation_id} is replaced by the record's operation id; every
-- resulting id must be valid, differ from the conflicting one and be free
-- for the record's payload: idem.quarantine_accept_clashes; a plan of
-- one record may name its new operation outright, as the single
-- accept-as-new of a money class does; none an import or a record brought: IX128,
-- idem.quarantine_import_refusal), one
-- reason, and p_selection (how the records were chosen, for the record). The
-- planner must be a person (IX313); nothing runs until another person
-- approves (quarantine_bulk_accept_approve). Recorded in the audit log.
-- Returns the plan.
CREATE OR REPLACE FUNCTION idem.quarantine_bulk_accept_plan(
    p_ids bigint[], p_rule text, p_max integer, p_operator text, p_reason text, p_selection jsonb
) RETURNS idem.quarantine_bulk_accept
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_person  text := idem.require_person('plan a bulk accept-as-new');
    v_problem text := idem.decision_input_problem(p_operator, p_reason);
    v_ids     bigint[];
    v_bad     record;
    v_p       idem.quarantine_bulk_accept;
BEGIN
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'bulk accept-as-new: %', v_problem
            USING ERRCODE = 'IX104', HINT = 'pass --reason and --operator (or set IDEMCTL_OPERATOR)';
    END IF;
    IF p_max IS NULL OR p_max < 1 OR p_max > 10000 THEN
        RAISE EXCEPTION 'bulk accept-as-new: the cap (--max) must be between 1 and 10000, not %', coalesce(p_max::text, 'NULL')
            USING ERRCODE = 'IX124';
    END IF;
    SELECT array_agg(DISTINCT u ORDER BY u) INTO v_ids FROM unnest(p_ids) u;
    IF p_rule IS NULL OR octet_length(p_rule) > 256
       OR (strpos(p_rule, '{operation_id}') = 0 AND coalesce(cardinality(v_ids), 0) <> 1) THEN
        RAISE EXCEPTION 'bulk accept-as-new: the rule % must contain {operation_id}', coalesce(quote_literal(p_rule), 'NULL')
            USING ERRCODE = 'IX123', HINT = 'e.g. --rule ''{operation_id}-rev2'': each record runs under its own new id';
    END IF;
    IF v_ids IS NULL OR cardinality(v_ids) > p_max THEN
        RAISE EXCEPTION 'bulk accept-as-new: % record(s), the cap is %', coalesce(cardinality(v_ids), 0), p_max
            USING ERRCODE = 'IX124', HINT = 'narrow the selection, or raise --max after checking what runs';
    END IF;
    -- A record an import or a record plan brought never runs as new (IX128).
    SELECT min(q.id) AS id, count(*) AS n INTO v_bad
    FROM idem.quarantine q
    WHERE q.id = ANY (v_ids) AND idem.quarantine_import_refusal(q.incoming_transport) IS NOT NULL;
    IF v_bad.n > 0 THEN
        RAISE EXCEPTION 'bulk accept-as-new: record % %', v_bad.id,
                idem.quarantine_import_refusal((SELECT q.incoming_transport FROM idem.quarantine q WHERE q.id = v_bad.id)) ||
                CASE WHEN v_bad.n > 1 THEN format(' (and %s more record(s) an import or a record brought)', v_bad.n - 1) ELSE '' END
            USING ERRCODE = 'IX128',
                  HINT = 'reject such records (idemctl quarantine reject ID --reason TEXT), or leave them out (ids on stdin: idemctl quarantine accept-as-new -); a really new operation is recorded by hand (idemctl record plan); nothing was planned';
    END IF;
    SELECT u AS id, q.status, q.operation_id,
           coalesce(idem.identity_problem(q.tenant_id, replace(p_rule, '{operation_id}', q.operation_id)),
                    CASE WHEN replace(p_rule, '{operation_id}', q.operation_id) = q.operation_id
                         THEN 'the new id equals the conflicting one' END) AS problem
    INTO v_bad
    FROM unnest(v_ids) u LEFT JOIN idem.quarantine q ON q.id = u
    WHERE q.id IS NULL OR q.status <> 'open'
       OR idem.identity_problem(q.tenant_id, replace(p_rule, '{operation_id}', q.operation_id)) IS NOT NULL
       OR replace(p_rule, '{operation_id}', q.operation_id) = q.operation_id
    ORDER BY u LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'bulk accept-as-new: record % %', v_bad.id,
                CASE WHEN v_bad.status IS NULL THEN 'does not exist'
                     WHEN v_bad.status <> 'open' THEN 'is already ' || v_bad.status
                     ELSE 'gets an invalid new operation id: ' || v_bad.problem END
            USING ERRCODE = 'IX123', HINT = 'nothing was planned';
    END IF;
    -- A new id another payload holds could never run: refuse it before
    -- anyone approves (idem.quarantine_accept_clashes).
    SELECT c.id, c.problem, count(*) OVER () AS n INTO v_bad
    FROM idem.quarantine_accept_clashes(v_ids, p_rule) c ORDER BY c.id LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'bulk accept-as-new: record % cannot run: %', v_bad.id, v_bad.problem ||
                CASE WHEN v_bad.n > 1 THEN format(' (and %s more record(s))', v_bad.n - 1) ELSE '' END
            USING ERRCODE = 'IX123',
                  HINT = 'choose another rule, or leave those records out (ids on stdin: idemctl quarantine accept-as-new -); nothing was planned';
    END IF;
    INSERT INTO idem.quarantine_bulk_accept (rule, max_count, ids, reason, selection, planned_by, planned_person, planned_db_user)
    VALUES (p_rule, p_max, v_ids, p_reason, coalesce(p_selection, '{}'::jsonb), p_operator, v_person, session_user)
    RETURNING * INTO v_p;
    PERFORM idem.audit_write(p_operator, 'quarantine.bulk_accept_plan', 'quarantine_bulk_accept:' || v_p.id,
        jsonb_build_object('records', cardinality(v_ids), 'rule', p_rule, 'max', p_max, 'reason', p_reason,
                           'selection', v_p.selection, 'person', v_person)::text);
    RETURN v_p;
END
$$;
