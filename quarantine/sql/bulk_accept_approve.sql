-- bulk_accept_approve.sql: the second person's approval (four-eyes, by person).
-- $1 plan id, $2 operator.
SELECT id, state, rule, max_count, ids, reason, selection, planned_at, planned_by, planned_person, planned_db_user,
       approved_at, approved_by, approved_person, approved_db_user, finished_at, abort_reason, done_through, accepted, skipped
FROM idem.quarantine_bulk_accept_approve($1, $2)
