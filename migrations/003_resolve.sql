-- 003_resolve: step 1 of the recovery protocol (refuse anything but the
-- authoritative primary) as one statement that raises, so that resolve can
-- send BEGIN, this check, the executor call and COMMIT in one pipeline: when
-- the check raises, PostgreSQL skips the rest of the pipeline, so nothing
-- after it runs and nothing commits.
--
-- SQLSTATEs (class IX, range IX201-IX299):
--   IX201 refused: the server is a standby (in recovery)
--   IX202 refused: the transaction is read-only

-- assert_primary raises unless this transaction can settle identities on the
-- primary, and names the operator for conflict records written in this
-- transaction (idem.record_conflict reads current_setting('idem.operator')).
CREATE FUNCTION idem.assert_primary(p_operator text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
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
