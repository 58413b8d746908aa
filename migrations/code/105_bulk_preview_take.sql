-- object: function idem.bulk_preview_take(text, text)
-- grant: operator
-- bulk_preview_take uses a preview's token for a bulk decision (p_action)
-- and returns the exact record ids the preview showed, with how they were
-- chosen. A token is refused (IX126, nothing used) when it is unknown,
-- already used, expired, of another action, or another person's (compared by
-- person, not login). Used once: the caller's transaction marks it.
CREATE OR REPLACE FUNCTION idem.bulk_preview_take(p_token text, p_action text)
RETURNS TABLE (ids bigint[], selection jsonb)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_person text := idem.require_person('run a bulk decision');
    v_p      idem.bulk_preview;
BEGIN
    SELECT * INTO v_p FROM idem.bulk_preview p WHERE p.token = p_token FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown preview token %', coalesce(quote_literal(p_token), 'NULL')
            USING ERRCODE = 'IX126', HINT = 'run the command without --token to preview and get one';
    ELSIF v_p.used_at IS NOT NULL THEN
        RAISE EXCEPTION 'preview token % was used at %', p_token, v_p.used_at
            USING ERRCODE = 'IX126', HINT = 'preview again: a token decides once';
    ELSIF v_p.expires_at <= now() THEN
        RAISE EXCEPTION 'preview token % expired at %', p_token, v_p.expires_at
            USING ERRCODE = 'IX126', HINT = 'preview again: a token lasts an hour';
    ELSIF v_p.action <> p_action THEN
        RAISE EXCEPTION 'preview token % is for %, not %', p_token, v_p.action, p_action USING ERRCODE = 'IX126';
    ELSIF v_p.person <> v_person THEN
        RAISE EXCEPTION 'preview token % belongs to % (login %), not to %', p_token, v_p.person, v_p.db_user, v_person
            USING ERRCODE = 'IX126', HINT = 'preview it yourself: a decision acts on what its decider saw';
    END IF;
    UPDATE idem.bulk_preview p SET used_at = now(), used_by = session_user WHERE p.token = p_token;
    ids := v_p.ids;
    selection := v_p.selection;
    RETURN NEXT;
END
$$;
