-- object: function idem.import_run_begin(bigint, text)
-- grant: operator
-- import_run_begin starts the run of an approved staged import plan
-- (idem.import_plan_seal_stage; IX341 otherwise) whose approval read its
-- source again (idem.import_plan_approve; its audit row says
-- checked_against_source, IX341 otherwise): the stage that approval
-- compared is what enters, so the source is not read again here. It
-- refuses a plan whose
-- rows hold an identity twice and a stage a crash of the database emptied
-- (IX343: plan again), makes the body partitions of the rows' real ages,
-- and makes the plan 'running' (audited: entry.run.start); its class is
-- checked again against what the plan cites (idem.entry_plan_class_check,
-- IX343). The rows then enter chunk by chunk (idem.import_run_chunk),
-- each chunk its own transaction, and idem.import_run_finish closes the
-- plan: unlike a plan run in one transaction, a run stopped half way has entered the chunks
-- that committed, and is resumed, not undone. A plan already running is
-- returned as it is (a resumed run). The runner must be a person (IX313).
-- Returns the plan.
CREATE OR REPLACE FUNCTION idem.import_run_begin(p_id bigint, p_operator text)
RETURNS idem.entry_plan
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_person text := idem.require_person('run an import');
    v_p      idem.entry_plan := idem.entry_plan_lock(p_id);
    v_t      text := format('idem.%I', 'import_stage_' || p_id);
    v_n      bigint;
    v_from   date;
    v_to     date;
BEGIN
    PERFORM idem.check_operator(p_operator, 'run');
    IF v_p.kind <> 'import' THEN
        RAISE EXCEPTION 'entry plan % is a % plan, not an import: run it with idemctl record run %', p_id, v_p.kind, p_id
            USING ERRCODE = 'IX341';
    END IF;
    IF NOT v_p.staged OR v_p.state NOT IN ('approved', 'running') THEN
        RAISE EXCEPTION 'entry plan % is % (%): only an approved staged import plan runs by chunks', p_id, v_p.state, v_p.kind
            USING ERRCODE = 'IX341';
    END IF;
    IF v_p.state = 'running' THEN
        RETURN v_p;
    END IF;
    -- What enters is the stage, and the stage is what the approver's read
    -- of the source gave (idem.import_plan_approve): the run does not read
    -- the source again. A plan approved before approvals read the source
    -- (its audit row does not say so) is refused: plan it again.
    IF NOT EXISTS (SELECT 1 FROM idem.audit a
                   WHERE a.target = 'entry_plan:' || p_id AND a.action = 'entry.approve'
                     AND CASE WHEN a.action = 'entry.approve'
                              THEN (a.details::jsonb ->> 'checked_against_source') = 'true' END) THEN
        RAISE EXCEPTION 'import plan % was approved without its source read again: it does not run', p_id
            USING ERRCODE = 'IX341',
                  HINT = 'abort it (idemctl import abort ' || p_id || ' --reason TEXT) and plan it again; idemctl import approve reads the source';
    END IF;
    PERFORM idem.entry_plan_class_check(p_id); -- a class may have become money since the approval
    IF (v_p.counts ->> 'identities_twice')::bigint > 0 THEN
        RAISE EXCEPTION 'import plan %: the source holds an identity twice (one plan holds it once): nothing entered', p_id
            USING ERRCODE = 'IX343', HINT = 'deduplicate the source''s query (one row per tenant and key), then plan again';
    END IF;
    IF to_regclass(v_t) IS NOT NULL THEN
        EXECUTE format('SELECT count(*) FROM %s', v_t) INTO v_n;
    END IF;
    IF v_n IS DISTINCT FROM v_p.items::bigint THEN
        RAISE EXCEPTION 'import plan %: its stage holds % of its % rows (an unlogged stage is emptied when the database restarts after a crash): nothing entered',
            p_id, coalesce(v_n, 0), v_p.items
            USING ERRCODE = 'IX343', HINT = 'plan the import again';
    END IF;
    v_from := ((v_p.counts ->> 'oldest')::timestamptz AT TIME ZONE 'UTC')::date;
    v_to := ((v_p.counts ->> 'newest')::timestamptz AT TIME ZONE 'UTC')::date;
    WHILE v_from <= v_to LOOP
        PERFORM idem.inbox_body_ensure(v_from, least(v_from + 399, v_to));
        v_from := v_from + 400;
    END LOOP;
    UPDATE idem.entry_plan SET state = 'running', started_at = now() WHERE id = p_id RETURNING * INTO v_p;
    PERFORM idem.audit_write(p_operator, 'entry.run.start', 'entry_plan:' || p_id,
        jsonb_build_object('kind', v_p.kind, 'items', v_p.items, 'items_digest', encode(v_p.items_digest, 'hex'),
                           'chunk_rows', v_p.counts -> 'chunk_rows',
                           'chunks', (v_p.items + (v_p.counts ->> 'chunk_rows')::bigint - 1) / (v_p.counts ->> 'chunk_rows')::bigint,
                           'all_or_nothing', false, 'person', v_person)::text);
    RETURN v_p;
END
$$;
