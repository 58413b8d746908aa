-- object: function idem.horizon_plan_create(text, boolean, timestamptz, interval, text, text, jsonb, uuid, interval)
-- grant: operator
-- horizon_plan_create records a purge plan from a proof: p_proof is the
-- evidence of every source (probed by idemctl), p_run the probe run whose
-- enumerated identities become the plan's pins. The database checks what it
-- can: the login maps to a person (IX313), the class exists, a forever class
-- cites a contract and never drops tombstones (IX304), no purge of the class
-- is in progress (IX302), and the requested cutoff lies outside the safety
-- margin (IX314). The cutoff is the earlier of p_before and now minus the
-- class's min-age. The plan expires p_expires after now (at least a minute,
-- at most 30 days; IX315 past it). Pins, held quarantine evidence,
-- candidates and the audit row are written here. Which entry plans it saw
-- (entry_high, entry_open) is read under a SHARE lock on idem.entry_plan,
-- which waits for an entry plan being created or run in one transaction and
-- holds new ones off until this commits (a staged import's chunks, each its
-- own transaction, are not held off): an import that runs later, or a chunk
-- that commits later, enters identities the candidates never counted, and the
-- purge refuses to go on (see idem.horizon_entered_after). Returns the plan.
CREATE OR REPLACE FUNCTION idem.horizon_plan_create(
    p_class text, p_drop_tombstones boolean, p_before timestamptz, p_margin interval, p_contract text,
    p_operator text, p_proof jsonb, p_run uuid, p_expires interval
) RETURNS idem.horizon_plan
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_person text := idem.require_person('plan a purge');
    v_class  idem.op_class;
    v_action text := CASE WHEN p_drop_tombstones THEN 'drop_tombstones' ELSE 'purge' END;
    v_p      idem.horizon_plan;
    v_high   bigint;
    v_open   bigint[];
BEGIN
    PERFORM idem.check_operator(p_operator, 'plan');
    SELECT * INTO v_class FROM idem.op_class WHERE name = p_class;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown operation class %', coalesce(quote_literal(p_class), 'NULL')
            USING ERRCODE = 'IX003', HINT = 'idemctl class list shows them';
    END IF;
    IF v_class.retention = 'forever' AND p_drop_tombstones THEN
        RAISE EXCEPTION 'class % is forever: its tombstones are never dropped', p_class USING ERRCODE = 'IX304';
    END IF;
    IF v_class.retention = 'forever' AND idem.text_problem('a contract reference', p_contract, 512) IS NOT NULL THEN
        RAISE EXCEPTION 'class % is forever (money): a purge needs a business contract reference: %', p_class,
                idem.text_problem('a contract reference', p_contract, 512)
            USING ERRCODE = 'IX304', HINT = 'pass --contract REF';
    END IF;
    IF p_contract IS NOT NULL AND idem.text_problem('a contract reference', p_contract, 512) IS NOT NULL THEN
        RAISE EXCEPTION 'plan: %', idem.text_problem('a contract reference', p_contract, 512) USING ERRCODE = 'IX304';
    END IF;
    IF p_margin IS NULL OR p_margin <= interval '0' OR p_before IS NULL OR p_before > now() - p_margin THEN
        RAISE EXCEPTION 'plan: the cutoff % lies inside the safety margin % (now is %)', p_before, p_margin, now()
            USING ERRCODE = 'IX314', HINT = 'plan before an earlier time, e.g. --before 30d';
    END IF;
    IF p_expires IS NULL OR p_expires < interval '1 minute' OR p_expires > interval '30 days' THEN
        RAISE EXCEPTION 'plan: it must expire between 1 minute and 30 days from now, not %', p_expires
            USING ERRCODE = 'IX306', HINT = '--expires-in 24h';
    END IF;
    IF p_proof IS NULL OR jsonb_typeof(p_proof) <> 'array' THEN
        RAISE EXCEPTION 'plan: the proof must be a JSON array of evidence' USING ERRCODE = '22023';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('idem.horizon_plan:' || p_class));
    IF EXISTS (SELECT 1 FROM idem.horizon_plan WHERE op_class = p_class AND state = 'purging') THEN
        RAISE EXCEPTION 'class %: another purge of this class is in progress', p_class
            USING ERRCODE = 'IX302', HINT = 'resume it first: idemctl horizon status';
    END IF;
    -- Read before the candidates are counted (a later snapshot): every entry
    -- plan done here has its identities counted below.
    LOCK TABLE idem.entry_plan IN SHARE MODE;
    SELECT coalesce(max(e.id), 0), coalesce(array_agg(e.id ORDER BY e.id) FILTER (WHERE e.state NOT IN ('done', 'aborted')), '{}')
    INTO v_high, v_open
    FROM idem.entry_plan e;
    INSERT INTO idem.horizon_plan (op_class, action, retention, min_age, contract, before, cutoff, margin,
                                   planned_by, planned_person, planned_db_user, proof, expires_at, entry_high, entry_open)
    VALUES (p_class, v_action, v_class.retention, v_class.min_age, nullif(btrim(p_contract), ''), p_before,
            least(p_before, now() - coalesce(v_class.min_age, interval '0')), p_margin,
            p_operator, v_person, session_user, p_proof, now() + p_expires, v_high, v_open)
    RETURNING * INTO v_p;
    -- Pins: what a source enumerated inside the range (the first source to
    -- name an identity keeps it), then what quarantine evidence holds.
    INSERT INTO idem.horizon_pin (plan_id, tenant_id, operation_id, source)
    SELECT DISTINCT ON (i.tenant_id, i.operation_id) v_p.id, i.tenant_id, i.operation_id, e.source
    FROM idem.horizon_enum e
    JOIN idem.identity i ON i.tenant_id = e.tenant_id AND i.operation_id = e.operation_id
    WHERE e.run_id = p_run AND i.op_class = p_class AND i.created_at < v_p.cutoff
    ORDER BY i.tenant_id, i.operation_id, e.source
    ON CONFLICT DO NOTHING;
    INSERT INTO idem.horizon_pin (plan_id, tenant_id, operation_id, source)
    SELECT DISTINCT v_p.id, q.tenant_id, q.operation_id, 'quarantine'
    FROM idem.quarantine q
    JOIN idem.identity i ON i.tenant_id = q.tenant_id AND i.operation_id = q.operation_id
    WHERE q.status IN ('open', 'rejected') AND i.op_class = p_class AND i.created_at < v_p.cutoff
    ON CONFLICT DO NOTHING;
    UPDATE idem.horizon_plan
    SET pinned = (SELECT count(*) FROM idem.horizon_pin WHERE plan_id = v_p.id),
        candidates = idem.horizon_candidates(v_p)
    WHERE id = v_p.id
    RETURNING * INTO v_p;
    PERFORM idem.audit_write(p_operator, 'horizon.plan', 'horizon_plan:' || v_p.id, jsonb_build_object(
        'class', p_class, 'action', v_action, 'retention', v_class.retention, 'contract', v_p.contract,
        'before', p_before, 'cutoff', v_p.cutoff, 'margin_seconds', extract(epoch FROM p_margin),
        'candidates', v_p.candidates, 'pinned', v_p.pinned, 'person', v_person, 'expires_at', v_p.expires_at,
        'proof', p_proof)::text);
    RETURN v_p;
END
$$;
