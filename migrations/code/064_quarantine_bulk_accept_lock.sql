-- object: function idem.quarantine_bulk_accept_lock(bigint)
-- quarantine_bulk_accept_lock locks a bulk accept-as-new plan and returns it,
-- or raises IX120 when there is none. Internal: granted to nobody.
CREATE OR REPLACE FUNCTION idem.quarantine_bulk_accept_lock(p_plan bigint)
RETURNS idem.quarantine_bulk_accept
LANGUAGE plpgsql
AS $$
DECLARE
    v_p idem.quarantine_bulk_accept;
BEGIN
    SELECT * INTO v_p FROM idem.quarantine_bulk_accept WHERE id = p_plan FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no bulk accept-as-new plan %', coalesce(p_plan::text, 'NULL')
            USING ERRCODE = 'IX120', HINT = 'idemctl quarantine accept-as-new printed the plan''s id to its planner; '
                             'idemctl audit list --action quarantine.bulk_accept_plan lists every plan (target quarantine_bulk_accept:ID)';
    END IF;
    RETURN v_p;
END
$$;
