-- object: function idem.assert_primary(text)
-- grant: operator
-- assert_primary is step 1 of the recovery protocol as one statement that
-- raises unless this transaction can settle identities on the primary
-- (IX201 standby, IX202 read-only), so that resolve can pipeline BEGIN, this
-- check, the executor and COMMIT: when it raises, nothing after it runs. It
-- also names the operator for conflict records written in this transaction.
CREATE OR REPLACE FUNCTION idem.assert_primary(p_operator text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
BEGIN
    IF pg_is_in_recovery() THEN
        RAISE EXCEPTION 'refused: the server is a standby (in recovery); nothing was concluded or written'
            USING ERRCODE = 'IX201',
                  HINT = 'use a DSN naming the primary, or several hosts with target_session_attrs=read-write';
    END IF;
    IF current_setting('transaction_read_only') = 'on' THEN
        RAISE EXCEPTION 'refused: the transaction is read-only; nothing was concluded or written'
            USING ERRCODE = 'IX202',
                  HINT = 'use a DSN naming the primary, or several hosts with target_session_attrs=read-write';
    END IF;
    IF p_operator IS NOT NULL THEN
        PERFORM set_config('idem.operator', p_operator, true);
    END IF;
END
$$;
