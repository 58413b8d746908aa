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

-- --class matches the stored or the incoming class; the open records of a
-- class (the class filter's default, and a group's records) have their own.
CREATE INDEX quarantine_class_activity_idx ON idem.quarantine (op_class, last_seen DESC, id DESC);
CREATE INDEX quarantine_open_class_activity_idx ON idem.quarantine (op_class, last_seen DESC, id DESC) WHERE status = 'open';
CREATE INDEX quarantine_incoming_class_activity_idx ON idem.quarantine (incoming_class, last_seen DESC, id DESC);

-- --changed /amount: the JSON Pointers of the differing values, as a JSON
-- array (["/amount", "/currency"]), matched with @>. The expression is the
-- one quarantine/sql/filter.sql uses; ANALYZE keeps statistics on it, so the
-- planner walks the activity index instead when most records match.
CREATE INDEX quarantine_changed_idx
    ON idem.quarantine USING gin ((jsonb_path_query_array(diff, '$[*].path')) jsonb_path_ops);

-- --source mobile (and groups by source): the incoming transport's "source",
-- else its "topic", as quarantine/sql/filter.sql spells it.
CREATE INDEX quarantine_source_activity_idx ON idem.quarantine (
    (coalesce(incoming_transport ->> 'source', incoming_transport ->> 'topic', '')), last_seen DESC, id DESC);

-- The age of the oldest open record, with any filter.
CREATE INDEX quarantine_open_first_seen_idx ON idem.quarantine (first_seen, id) WHERE status = 'open';

-- quarantine_bulk_accept: a plan to accept many records as new operations at
-- once. Accepting runs effects, so a plan fixes its records (ids, at most
-- max_count, at most 10,000), the rule that names each new operation
-- ({operation_id}-rev2), one reason, and waits for a second person's
-- approval (four-eyes, as purges) before any of it runs. done_through is the
-- largest id handled so far: a run resumes after it.
CREATE TABLE idem.quarantine_bulk_accept (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    state            text NOT NULL DEFAULT 'planned'
                     CHECK (state IN ('planned', 'approved', 'running', 'done', 'aborted')),
    rule             text NOT NULL CHECK (strpos(rule, '{operation_id}') > 0 AND octet_length(rule) <= 256),
    max_count        integer NOT NULL CHECK (max_count BETWEEN 1 AND 10000),
    ids              bigint[] NOT NULL,
    reason           text NOT NULL CHECK (btrim(reason) <> '' AND octet_length(reason) <= 4096),
    selection        jsonb NOT NULL,
    planned_at       timestamptz NOT NULL DEFAULT now(),
    planned_by       text NOT NULL,
    planned_person   text NOT NULL,
    planned_db_user  text NOT NULL,
    approved_at      timestamptz,
    approved_by      text,
    approved_person  text,
    approved_db_user text,
    started_at       timestamptz,
    finished_at      timestamptz,
    aborted_at       timestamptz,
    aborted_by       text,
    abort_reason     text,
    done_through     bigint NOT NULL DEFAULT 0,
    accepted         integer NOT NULL DEFAULT 0,
    skipped          integer NOT NULL DEFAULT 0,
    CONSTRAINT bulk_accept_count CHECK (cardinality(ids) BETWEEN 1 AND max_count),
    CONSTRAINT bulk_accept_four_eyes CHECK (approved_person IS NULL OR approved_person <> planned_person),
    CONSTRAINT bulk_accept_state_complete CHECK (CASE state
        WHEN 'planned' THEN approved_at IS NULL AND started_at IS NULL AND finished_at IS NULL AND aborted_at IS NULL
        WHEN 'approved' THEN approved_person IS NOT NULL AND started_at IS NULL AND finished_at IS NULL AND aborted_at IS NULL
        WHEN 'running' THEN approved_person IS NOT NULL AND started_at IS NOT NULL AND finished_at IS NULL AND aborted_at IS NULL
        WHEN 'done' THEN approved_person IS NOT NULL AND started_at IS NOT NULL AND finished_at IS NOT NULL AND aborted_at IS NULL
        ELSE aborted_at IS NOT NULL AND abort_reason IS NOT NULL AND finished_at IS NULL
        END)
);
