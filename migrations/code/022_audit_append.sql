-- object: function idem.audit_append(text, text, text, text)
-- grant: operator
-- audit_append records a report of what an operator tool did that changes no
-- state of this schema: a resolve run (its start and its finish), a reconcile
-- or intake run, a quarantine export, a horizon check. Every action that
-- changes state (decisions, plans, approvals, purges, sources, corrections,
-- class policies, persons) is recorded by the function that does it, and
-- cannot be written here (IX113): a forged "quarantine.reject" row proves
-- nothing and decides nothing.
CREATE OR REPLACE FUNCTION idem.audit_append(p_actor text, p_action text, p_target text, p_details text)
RETURNS idem.audit
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
BEGIN
    IF p_action IS NULL OR p_action !~ '^(resolve|reconcile|intake)\.[a-z_]+$|^quarantine\.export$|^horizon\.check$' THEN
        RAISE EXCEPTION 'audit action % is written only by the function that performs it', coalesce(quote_literal(p_action), 'NULL')
            USING ERRCODE = 'IX113',
                  HINT = 'reports: resolve.*, reconcile.*, intake.*, quarantine.export, horizon.check';
    END IF;
    RETURN idem.audit_write(p_actor, p_action, p_target, p_details);
END
$$;
