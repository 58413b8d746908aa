-- object: function idem.class_redrive_set(text, jsonb, boolean, text)
-- grant: operator
-- class_redrive_set sets (or, with p_redrive NULL, clears) how a class whose
-- effect lives in a service is re-driven by idemctl resolve, and whether its
-- downstream calls are idempotent. The configuration is checked here, for
-- every caller:
--   kind http: url https://..., or http:// to a loopback host, or any http
--     with "insecure": true (the operator said so; recorded); method POST or
--     PUT; headers a JSON object of strings, where a header that carries a
--     credential (authorization, cookie, *token*, *secret*, *key*, *password*)
--     must be a reference, never a value, and every reference names only
--     what the person running resolve sets aside (env:IDEMCTL_REDRIVE_NAME,
--     or file:PATH relative to their credential directory;
--     idem.redrive_reference_problem);
--   kind nats: url nats:// or tls:// (every server of a comma-separated
--     list), and a subject without wildcards;
--   every host of the URL on the allow-list (idem.redrive_allow; IX504), no
--   credentials in the URL (IX503), timeout_seconds in (0, 300],
--   concurrency in [1, 256], no other key (IX502).
-- Only a class without a SQL effect is re-driven (resolve runs SQL effects
-- itself). The change and its before and after are recorded in the audit log.
CREATE OR REPLACE FUNCTION idem.class_redrive_set(
    p_class text, p_redrive jsonb, p_downstream_idempotent boolean, p_operator text
) RETURNS idem.op_class
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_old     idem.op_class;
    v_new     idem.op_class;
    v_problem text;
BEGIN
    PERFORM idem.check_operator(p_operator, 'class redrive');
    SELECT * INTO v_old FROM idem.op_class WHERE name = p_class FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown operation class %', coalesce(quote_literal(p_class), 'NULL')
            USING ERRCODE = 'IX003', HINT = 'idemctl class list shows them';
    END IF;
    IF p_redrive IS NOT NULL THEN
        IF v_old.effect IS NOT NULL THEN
            RAISE EXCEPTION 'class % runs a SQL effect, which resolve executes itself: nothing to re-drive', p_class
                USING ERRCODE = 'IX502';
        END IF;
        v_problem := idem.redrive_problem(p_redrive);
        IF v_problem IS NOT NULL THEN
            RAISE EXCEPTION 'class % re-drive: %', p_class, substr(v_problem, 7)
                USING ERRCODE = substr(v_problem, 1, 5);
        END IF;
    END IF;
    UPDATE idem.op_class SET redrive = p_redrive, downstream_idempotent = coalesce(p_downstream_idempotent, false)
    WHERE name = p_class
    RETURNING * INTO v_new;
    PERFORM idem.audit_write(p_operator, 'class.redrive.set', 'class:' || p_class, jsonb_build_object(
        'before', jsonb_build_object('redrive', v_old.redrive, 'downstream_idempotent', v_old.downstream_idempotent),
        'after', jsonb_build_object('redrive', v_new.redrive, 'downstream_idempotent', v_new.downstream_idempotent))::text);
    RETURN v_new;
END
$$;
