-- object: function idem.quarantine_lock(bigint)
-- quarantine_lock locks a quarantine record and returns it (NULL when there
-- is none). The record is found by id first and then locked by its key,
-- tenant first, which never changes: on Citus the lock is then taken on the
-- one shard that holds it (a lock across every shard is not possible there).
-- Internal: the decision functions call it, each judging what it finds.
CREATE OR REPLACE FUNCTION idem.quarantine_lock(p_id bigint)
RETURNS idem.quarantine
LANGUAGE plpgsql
AS $$
DECLARE
    v_q      idem.quarantine;
    v_tenant text;
BEGIN
    SELECT q.tenant_id INTO v_tenant FROM idem.quarantine q WHERE q.id = p_id;
    SELECT * INTO v_q FROM idem.quarantine q WHERE q.tenant_id = v_tenant AND q.id = p_id FOR UPDATE;
    RETURN v_q;
END
$$;
