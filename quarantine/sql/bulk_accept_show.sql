-- bulk_accept_show.sql: one plan. $1 plan id.
SELECT id, state, rule, max_count, ids, reason, selection, planned_at, planned_by, planned_person, planned_db_user,
       approved_at, approved_by, approved_person, approved_db_user, finished_at, abort_reason, done_through, accepted, skipped
FROM idem.quarantine_bulk_accept
WHERE id = $1
