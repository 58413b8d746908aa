-- object: function idem.quarantine_lock_open(bigint)
-- quarantine_lock_open locks a record for a decision and returns it, or raises
-- when it does not exist (IX101) or is already decided (IX103). Two operators
-- deciding at once queue on the row lock; the second then sees the first's
-- decision and is refused. The lock is idem.quarantine_lock's (by tenant and
-- id, one shard on Citus).
CREATE OR REPLACE FUNCTION idem.quarantine_lock_open(p_id bigint)
RETURNS idem.quarantine
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_q idem.quarantine := idem.quarantine_lock(p_id);
BEGIN
    IF v_q.id IS NULL THEN
        RAISE EXCEPTION 'no quarantine record %', coalesce(p_id::text, 'NULL')
            USING ERRCODE = 'IX101', HINT = 'idemctl quarantine list shows the records';
    END IF;
    IF v_q.status <> 'open' THEN
        RAISE EXCEPTION '%', format('quarantine record %s was already %s%s by %s', v_q.id, v_q.status,
                CASE WHEN v_q.status = 'accepted'
                     THEN format(' as new operation %s', quote_literal(v_q.new_operation_id)) ELSE '' END,
                -- who decided: the person, then the login (as every screen shows it)
                CASE WHEN coalesce(v_q.decided_person, '') = '' THEN '(no person) ' || v_q.decided_db_user
                     ELSE v_q.decided_person || ' (' || v_q.decided_db_user || ')' END)
            USING ERRCODE = 'IX103',
                  DETAIL = format('decided at %s (operator %s): %s',
                                  v_q.decided_at, v_q.decided_by, v_q.decision_reason),
                  HINT = 'a decision is final; nothing was changed';
    END IF;
    RETURN v_q;
END
$$;
