-- bulk_accept_plan.sql: plan a bulk accept-as-new (idem.quarantine_bulk_accept_plan
-- checks every record, the rule and the cap, and writes the audit row).
-- $1 ids, $2 rule, $3 max, $4 operator, $5 reason, $6 selection (JSON).
SELECT id, state, rule, max_count, ids, reason, selection, planned_at, planned_by, planned_person, planned_db_user,
       approved_at, approved_by, approved_person, approved_db_user, finished_at, abort_reason, done_through, accepted, skipped
FROM idem.quarantine_bulk_accept_plan($1, $2, $3, $4, $5, $6::jsonb)
