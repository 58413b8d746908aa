-- object: function idem.import_run_finish(bigint, text)
-- grant: operator
-- import_run_finish closes the run of a staged import plan once every
-- chunk committed (idem.import_run_chunk; IX341 while one is missing):
-- the plan becomes 'done' with what entered and what was left alone,
-- audited (entry.run, with the chunks and who ran them, and that the run
-- was not one transaction), and its stage is dropped. The runner must be a
-- person (IX313). Returns the plan.
CREATE OR REPLACE FUNCTION idem.import_run_finish(p_id bigint, p_operator text)
RETURNS idem.entry_plan
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_person text := idem.require_person('run an import');
    v_p      idem.entry_plan := idem.entry_plan_lock(p_id);
    v_chunks bigint;
    v_done   record;
    v_c      record;
BEGIN
    PERFORM idem.check_operator(p_operator, 'run');
    IF v_p.kind <> 'import' OR NOT v_p.staged OR v_p.state <> 'running' THEN
        RAISE EXCEPTION 'entry plan % is % (%): only a running staged import plan is finished', p_id, v_p.state, v_p.kind
            USING ERRCODE = 'IX341';
    END IF;
    v_chunks := (v_p.items + (v_p.counts ->> 'chunk_rows')::bigint - 1) / (v_p.counts ->> 'chunk_rows')::bigint;
    SELECT count(*) AS n, coalesce(sum(entered), 0) AS entered, coalesce(sum(left_alone), 0) AS left_alone,
           array_agg(DISTINCT person) AS persons, min(done_at) AS first_at, max(done_at) AS last_at
    INTO v_done
    FROM idem.import_chunk WHERE plan_id = p_id;
    IF v_done.n <> v_chunks THEN
        RAISE EXCEPTION 'import plan %: % of its % chunks committed: run it again to enter the others', p_id, v_done.n, v_chunks
            USING ERRCODE = 'IX341';
    END IF;
    SELECT count(*) FILTER (WHERE outcome = 'refused') AS n_refused, count(*) FILTER (WHERE outcome = 'skipped') AS n_skipped,
           count(*) FILTER (WHERE outcome = 'quarantined') AS n_quarantined,
           count(*) FILTER (WHERE outcome = 'conflict_hash_only') AS n_conflict_hash_only, count(outcome) AS n_left
    INTO v_c
    FROM idem.entry_item WHERE plan_id = p_id;
    IF v_done.entered + v_done.left_alone <> v_p.items OR v_c.n_left <> v_done.left_alone THEN
        RAISE EXCEPTION 'import plan %: its chunks account for % entered and % left alone of % items (% item rows)', p_id,
            v_done.entered, v_done.left_alone, v_p.items, v_c.n_left USING ERRCODE = 'IX343';
    END IF;
    UPDATE idem.entry_plan
    SET state = 'done', finished_at = now(), entered = v_done.entered, left_alone = v_done.left_alone
    WHERE id = p_id
    RETURNING * INTO v_p;
    EXECUTE format('DROP TABLE IF EXISTS %s', format('idem.%I', 'import_stage_' || p_id));
    PERFORM idem.audit_write(p_operator, 'entry.run', 'entry_plan:' || p_id,
        jsonb_build_object('kind', v_p.kind, 'entered', v_p.entered, 'left_alone', v_p.left_alone, 'exists', 0,
                           'refused', v_c.n_refused, 'skipped', v_c.n_skipped, 'quarantined', v_c.n_quarantined,
                           'conflict_hash_only', v_c.n_conflict_hash_only,
                           'source_digest', v_p.source_digest, 'items_digest', encode(v_p.items_digest, 'hex'),
                           'counts', v_p.counts, 'cursor', v_p.cursor,
                           'chunks', v_chunks, 'chunk_persons', to_jsonb(v_done.persons), 'started_at', v_p.started_at,
                           'first_chunk_at', v_done.first_at, 'last_chunk_at', v_done.last_at,
                           -- one transaction (idem.entry_plan_run) when every chunk has its start's time
                           'all_or_nothing', v_done.first_at = v_p.started_at AND v_done.last_at = now() AND now() = v_p.started_at,
                           'person', v_person)::text);
    RETURN v_p;
END
$$;
