-- 011_who_ran: who ran a purge, kept after it finished.
--
-- The runner columns (009) name the session that holds a purge while it
-- runs and are cleared when it finishes or is released, so a finished plan
-- no longer said who ran it. ran_person and ran_db_user keep the person and
-- the login that last began or resumed the purge: stored, not looked up again
-- through idem.person_login, because a mapping can change after the fact.
ALTER TABLE idem.horizon_plan
    ADD COLUMN ran_person text,
    ADD COLUMN ran_db_user text,
    ADD CONSTRAINT plan_ran CHECK ((ran_person IS NULL) = (ran_db_user IS NULL)
                                   AND (ran_person IS NULL OR purge_started_at IS NOT NULL));

-- Plans begun before this migration: the audit row of their last purge start
-- names the person and the login. One UPDATE a plan, by constant, not a
-- join: on Citus horizon_plan is a reference table and the audit a local one.
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT DISTINCT ON (target) substring(target FROM '^horizon_plan:([0-9]+)$')::bigint AS plan_id,
               details::jsonb ->> 'person' AS person, details::jsonb ->> 'login' AS login
        FROM idem.audit
        WHERE action = 'horizon.purge.start' AND target ~ '^horizon_plan:[0-9]+$'
        ORDER BY target, id DESC
    LOOP
        CONTINUE WHEN r.person IS NULL OR r.login IS NULL;
        UPDATE idem.horizon_plan SET ran_person = r.person, ran_db_user = r.login
        WHERE id = r.plan_id AND purge_started_at IS NOT NULL;
    END LOOP;
END
$$;
