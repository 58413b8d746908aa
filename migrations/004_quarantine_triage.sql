-- 004_quarantine_triage: indexes for triage at incident scale (issue 16):
-- `quarantine list`, `groups` and bulk decisions filter on the server by
-- operation id, class, differing field and age, and page by keyset on
-- (last_seen DESC, id DESC). Each filter has an index, so a page stays cheap
-- whatever the size of the quarantine.

-- --op and --op-prefix: byte order (COLLATE "C"), so that a prefix is a range
-- of the index whatever the database's collation; an exact operation id is
-- then already in activity order.
CREATE INDEX quarantine_operation_activity_idx
    ON idem.quarantine ((operation_id COLLATE "C"), last_seen DESC, id DESC);

-- --class matches the stored or the incoming class.
CREATE INDEX quarantine_class_activity_idx ON idem.quarantine (op_class, last_seen DESC, id DESC);
CREATE INDEX quarantine_incoming_class_activity_idx ON idem.quarantine (incoming_class, last_seen DESC, id DESC);

-- --changed /amount: the JSON Pointers of the differing values, as a JSON
-- array (["/amount", "/currency"]), matched with @>. The expression is the
-- one quarantine/sql/filter.sql uses; ANALYZE keeps statistics on it, so the
-- planner walks the activity index instead when most records match.
CREATE INDEX quarantine_changed_idx
    ON idem.quarantine USING gin ((jsonb_path_query_array(diff, '$[*].path')) jsonb_path_ops);

-- The age of the oldest open record, with any filter.
CREATE INDEX quarantine_open_first_seen_idx ON idem.quarantine (first_seen, id) WHERE status = 'open';
