-- object: function idem.class_money_set(text, jsonb, text, text)
-- grant: operator
-- class_money_set declares that class p_name moves money: p_money is
-- {"amount": POINTER, "currency": POINTER, "unit": "minor"|"major"}, or NULL
-- to say it moves none. One person declares it where there was none
-- (applied at once). Changing or removing a declaration switches four eyes
-- off for the class, so it becomes a governed change (idem.governed_change)
-- that another person approves; it needs a reason. The login must map to a
-- person (IX313); an invalid declaration or a missing reason is IX306.
-- Audited. Returns whether it was applied, and the change planned otherwise.
CREATE OR REPLACE FUNCTION idem.class_money_set(p_name text, p_money jsonb, p_operator text, p_reason text)
RETURNS TABLE (applied boolean, change_id bigint)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_person text := idem.require_person('declare a money class');
    v_old    idem.op_class;
    v_new    jsonb;
    v_c      idem.governed_change;
BEGIN
    PERFORM idem.check_operator(p_operator, 'class set');
    IF p_reason IS NOT NULL AND idem.text_problem('a reason', p_reason, 4096) IS NOT NULL THEN
        RAISE EXCEPTION 'class set: %', idem.text_problem('a reason', p_reason, 4096) USING ERRCODE = 'IX306';
    END IF;
    IF p_money IS NOT NULL AND jsonb_typeof(p_money) <> 'null' THEN
        v_new := jsonb_build_object('amount', p_money ->> 'amount', 'currency', p_money ->> 'currency',
                                    'unit', p_money ->> 'unit');
        IF jsonb_typeof(p_money) <> 'object' OR (SELECT count(*) FROM jsonb_object_keys(p_money)) <> 3
           OR NOT coalesce(v_new ->> 'amount' ~ '^/' AND v_new ->> 'currency' ~ '^/'
                           AND octet_length(v_new ->> 'amount') <= 256 AND octet_length(v_new ->> 'currency') <= 256
                           AND v_new ->> 'amount' !~ '[\x01-\x1f\x7f-\x9f]'
                           AND v_new ->> 'currency' !~ '[\x01-\x1f\x7f-\x9f]'
                           AND v_new ->> 'unit' IN ('minor', 'major'), false) THEN
            RAISE EXCEPTION 'class %: a money declaration is an amount pointer, a currency pointer and minor or major, not %',
                    p_name, p_money
                USING ERRCODE = 'IX306', HINT = 'e.g. --money /amount,/currency,minor';
        END IF;
    END IF;
    SELECT * INTO v_old FROM idem.op_class WHERE name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown operation class %', coalesce(quote_literal(p_name), 'NULL')
            USING ERRCODE = 'IX003', HINT = 'idemctl class list shows them';
    END IF;
    IF v_old.money IS NOT DISTINCT FROM v_new THEN
        RETURN QUERY SELECT true, NULL::bigint;
        RETURN;
    END IF;
    IF v_old.money IS NULL THEN
        UPDATE idem.op_class SET money = v_new WHERE name = p_name;
        PERFORM idem.audit_write(p_operator, 'class.money.set', 'class:' || p_name,
            jsonb_build_object('before', NULL, 'after', v_new, 'reason', p_reason, 'person', v_person)::text);
        RETURN QUERY SELECT true, NULL::bigint;
        RETURN;
    END IF;
    IF idem.text_problem('a reason', p_reason, 4096) IS NOT NULL THEN
        RAISE EXCEPTION 'class % moves money: changing or removing its declaration needs a reason and a second person',
                p_name
            USING ERRCODE = 'IX306', HINT = 'pass --reason; another person then runs idemctl change approve';
    END IF;
    INSERT INTO idem.governed_change (kind, target, before, after, reason, planned_by, planned_person, planned_db_user)
    VALUES ('class_money', p_name, v_old.money, v_new, p_reason, p_operator, v_person, session_user)
    RETURNING * INTO v_c;
    PERFORM idem.audit_write(p_operator, 'governed_change.plan', 'governed_change:' || v_c.id,
        jsonb_build_object('kind', v_c.kind, 'target', p_name, 'before', v_c.before, 'after', v_c.after,
                           'reason', p_reason, 'person', v_person)::text);
    RETURN QUERY SELECT false, v_c.id;
END
$$;
