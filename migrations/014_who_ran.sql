-- 014_who_ran: who ran a purge, kept after it finished.
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
-- names the person and the login.
UPDATE idem.horizon_plan p
SET ran_person = s.details ->> 'person', ran_db_user = s.details ->> 'login'
FROM (SELECT DISTINCT ON (target) target, details::jsonb AS details FROM idem.audit
      WHERE action = 'horizon.purge.start' ORDER BY target, id DESC) s
WHERE s.target = 'horizon_plan:' || p.id AND p.purge_started_at IS NOT NULL
  AND s.details ->> 'person' IS NOT NULL AND s.details ->> 'login' IS NOT NULL;
