-- object: function idem.horizon_entered_after(bigint)
-- grant: operator, auditor
-- horizon_entered_after names the entry plans (imports, records) that ran
-- after horizon plan p_id (p) counted its candidates and could have entered identities of
-- its class before its cutoff: entered at least one identity (a done plan
-- counts them; a staged import that is still running, or was aborted after
-- a crash emptied its stage, has them in its committed chunks), of p's
-- class (or of classes their counts do not name), and, for a record (which
-- enters at its run's time), run before the cutoff. A chunked import's
-- chunks are transactions of their own, which p's SHARE lock on
-- idem.entry_plan does not hold off: one running when p was made (in
-- entry_open) may enter a chunk at any time after p counted, so once any
-- chunk of it entered, p cannot tell which it counted and the purge
-- refuses (plan again once the import is done). p counted none of their
-- identities, its proof never saw them and its approver never approved their
-- removal: the purge refuses to go on while any exists (IX316, checked when
-- it begins and after every deleting transaction, in the same transaction).
-- Which entry plans p saw: idem.horizon_plan_create records entry_high and
-- entry_open (migration 016); a plan made before that compares times.
-- Empty when there is none. It takes the plan's id, not its row: on Citus a
-- row read from the reference table has its shard's type.
CREATE OR REPLACE FUNCTION idem.horizon_entered_after(p_id bigint)
RETURNS bigint[]
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    p         idem.horizon_plan;
    v_ids     bigint[];
    v_chunked bigint[];
BEGIN
    SELECT * INTO p FROM idem.horizon_plan h WHERE h.id = p_id;
    -- Read apart from idem.entry_plan: on Citus the chunks are a
    -- coordinator table and the entry plans a reference table.
    SELECT coalesce(array_agg(DISTINCT c.plan_id), '{}') INTO v_chunked
    FROM idem.import_chunk c
    WHERE c.entered > 0
      AND (p.entry_high IS NULL OR c.plan_id > p.entry_high OR c.plan_id = ANY (coalesce(p.entry_open, '{}')));
    SELECT coalesce(array_agg(e.id ORDER BY e.id), '{}') INTO v_ids
    FROM idem.entry_plan e
    WHERE (e.state = 'done' AND e.entered > 0 OR e.state IN ('running', 'aborted') AND e.id = ANY (v_chunked))
      AND CASE WHEN p.entry_high IS NULL THEN coalesce(e.finished_at, 'infinity') >= p.planned_at
               ELSE e.id > p.entry_high OR e.id = ANY (coalesce(p.entry_open, '{}')) END
      AND (jsonb_typeof(e.counts -> 'classes') IS DISTINCT FROM 'object' OR e.counts -> 'classes' ? p.op_class)
      AND (e.kind <> 'record' OR e.started_at < p.cutoff);
    RETURN v_ids;
END
$$;
