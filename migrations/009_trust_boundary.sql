-- 009_trust_boundary: who runs a purge, and the audit head guarded like the
-- audit itself.
--
-- A purge runs as a series of transactions on one session. The session that
-- began it is recorded with the plan (its backend pid, login and person) and
-- every batch checks that it is that session, that login and that person;
-- nothing outside the plan's row, which only the schema owner writes, can
-- stand in for it (a session advisory lock could be taken by any login). A
-- runner whose session ended no longer holds the plan: idemctl horizon purge
-- resumes it.
ALTER TABLE idem.horizon_plan
    ADD COLUMN runner_pid    integer,
    ADD COLUMN runner_login  text,
    ADD COLUMN runner_person text,
    ADD CONSTRAINT plan_runner CHECK ((runner_pid IS NULL) = (runner_login IS NULL) AND (runner_pid IS NULL) = (runner_person IS NULL)
                                      AND (runner_pid IS NULL OR state = 'purging'));

-- An IPv6 address is a re-drive host too (written without its brackets, as
-- idem.redrive_host_of returns it: ::1).
ALTER TABLE idem.redrive_host DROP CONSTRAINT redrive_host_host_check;
ALTER TABLE idem.redrive_host ADD CONSTRAINT redrive_host_host_check
    CHECK (host ~ '^([a-z0-9]([a-z0-9.-]*[a-z0-9])?|[0-9a-f.]*:[0-9a-f:.]*)$' AND octet_length(host) <= 253);
