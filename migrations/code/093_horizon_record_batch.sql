-- object: function idem.horizon_record_batch(bigint, text, text, bigint, bigint, timestamptz)
-- horizon_record_batch counts one purge transaction into its plan and logs it
-- (relation, method, rows removed, rows kept, when it started). The plan's
-- row lock (the UPDATE) orders the batches' sequence numbers. Called after
-- the transaction's deletion, it refuses (IX316, the whole transaction rolls
-- back) when an entry plan entered identities into the plan's range after the
-- plan was made (idem.horizon_entered_after): its statement's snapshot is
-- later than the deletion's, so it sees every import the deletion saw.
CREATE OR REPLACE FUNCTION idem.horizon_record_batch(
    p_plan bigint, p_part text, p_method text, p_rows bigint, p_kept bigint, p_started timestamptz
) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_seq   integer;
    v_p     idem.horizon_plan;
    v_after bigint[];
BEGIN
    -- Two statements rather than one with a data-modifying WITH: on Citus
    -- the plan is a reference table and the batch log a coordinator table,
    -- which one statement cannot modify together. (PL/pgSQL, not SQL: Citus
    -- cannot plan a SQL function's statements that use its parameters.)
    UPDATE idem.horizon_plan SET purged = purged + p_rows, batches = batches + 1 WHERE id = p_plan
    RETURNING * INTO v_p;
    v_seq := v_p.batches;
    v_after := idem.horizon_entered_after(v_p.id);
    IF cardinality(v_after) > 0 THEN
        RAISE EXCEPTION 'purge plan %: entry plan % entered identities of class % before its cutoff after the plan counted its candidates: this transaction deleted nothing',
                p_plan, array_to_string(v_after, ', '), v_p.op_class
            USING ERRCODE = 'IX316', HINT = 'cancel it and plan again (after a running import is done): idemctl horizon plan';
    END IF;
    INSERT INTO idem.horizon_batch (plan_id, seq, part, method, rows, kept, started_at)
    VALUES (p_plan, v_seq, p_part, p_method, p_rows, p_kept, p_started);
END
$$;
