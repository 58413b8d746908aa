-- object: function idem.audit_write(text, text, text, text)
-- audit_write appends one row at the end of the chain: it checks the entry,
-- takes the head's row lock (appends serialise on it until commit: append as
-- the last write of a transaction), assigns the next id, the transaction time,
-- the person and database user behind the session, prev_hash and hash, and
-- moves the head. Only functions of this schema call it: every decision,
-- plan, approval and purge writes its own audit row in its own transaction.
-- Under REPEATABLE READ a concurrent append makes the later writer fail with
-- 40001 instead of forking the chain.
CREATE OR REPLACE FUNCTION idem.audit_write(p_actor text, p_action text, p_target text, p_details text)
RETURNS idem.audit
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_problem text := idem.text_problem('the operator label', p_actor, 256);
    v_head    idem.audit_head;
    v_row     idem.audit;
BEGIN
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'audit entry %: %', coalesce(p_action, 'NULL'), v_problem
            USING ERRCODE = 'IX111', HINT = 'pass --operator or set IDEMCTL_OPERATOR';
    END IF;
    IF p_action IS NULL OR p_action !~ '^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$' OR octet_length(p_action) > 128 THEN
        RAISE EXCEPTION 'audit entry: action % must be dotted lower-case words (e.g. quarantine.reject)',
                coalesce(quote_literal(p_action), 'NULL')
            USING ERRCODE = 'IX111';
    END IF;
    IF octet_length(coalesce(p_target, '')) > 512 OR coalesce(p_target, '') ~ '[\x01-\x1f\x7f-\x9f]' THEN
        RAISE EXCEPTION 'audit entry %: the target is longer than 512 bytes or holds a control character', p_action
            USING ERRCODE = 'IX111';
    END IF;
    IF p_details IS NULL OR octet_length(p_details) > 1048576 OR p_details ~ '[\x01-\x1f\x7f-\x9f]'
       OR jsonb_typeof(p_details::jsonb) <> 'object' THEN
        RAISE EXCEPTION 'audit entry %: details must be a JSON object of at most 1 MiB, without raw control characters', p_action
            USING ERRCODE = 'IX111';
    END IF;
    SELECT * INTO v_head FROM idem.audit_head WHERE singleton FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'the audit head is missing: the log has been tampered with (run idemctl audit verify)'
            USING ERRCODE = 'IX112';
    END IF;
    v_row.id := v_head.last_id + 1;
    v_row.at := now();
    v_row.actor := p_actor;
    v_row.person := coalesce(idem.current_person(), '');
    v_row.db_user := session_user;
    v_row.action := p_action;
    v_row.target := coalesce(p_target, '');
    v_row.details := p_details;
    v_row.prev_hash := v_head.last_hash;
    v_row.hash := idem.audit_row_hash(v_row.id, v_row.at, v_row.actor, v_row.person, v_row.db_user, v_row.action,
                                      v_row.target, v_row.details, v_row.prev_hash);
    INSERT INTO idem.audit VALUES (v_row.*);
    UPDATE idem.audit_head SET last_id = v_row.id, last_hash = v_row.hash, updated_at = now() WHERE singleton;
    RETURN v_row;
END
$$;
