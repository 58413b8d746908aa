-- 002_quarantine_audit: the quarantine becomes a case file a person decides
-- (evidence with a field-by-field diff, immutable; a decision taken once, through
-- idem.quarantine_reject or idem.quarantine_accept_as_new), and idem.audit, an
-- append-only, hash-chained record of every operator action.
--
-- SQLSTATEs (class IX, range IX101-IX199):
--   IX101 quarantine record not found        IX102 quarantine evidence is immutable
--   IX103 quarantine record already decided  IX104 decision needs an operator and a reason
--   IX105 invalid new operation id           IX106 new identity exists with another payload
--   IX107 decision outside the decision path
--   IX110 audit log is append-only           IX111 invalid audit entry
--   IX112 audit head changed outside an append

-- json_pointer_token escapes one object member name as an RFC 6901 reference
-- token: "~" becomes "~0" and "/" becomes "~1" (in that order, so "~1" in a
-- name is not mistaken for "/").
CREATE FUNCTION idem.json_pointer_token(p_key text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
AS $$ SELECT replace(replace(p_key, '~', '~0'), '/', '~1') $$;

-- json_diff lists EVERY difference between two JSON documents, as a jsonb array
-- of {"path", "change", "stored", "incoming"} in document order:
--   path      RFC 6901 JSON Pointer of the differing value ("" is the whole document);
--   change    added        the member or element exists only in incoming ("stored" is null);
--             removed      it exists only in stored ("incoming" is null);
--             type_changed both exist with different JSON types (number -> string, object -> array...);
--             changed      both exist with the same type and different values;
--   stored, incoming  the two values (whole subtrees for type changes, added and removed).
-- A JSON null that is really there is told apart from an absent side by "change".
-- Objects are compared member by member (sorted by name), arrays element by
-- element (index i against index i; extra elements are added or removed), so an
-- element inserted at the front of an array shows as changes down the array.
-- A recursive CTE rather than a recursive function: no stack depth limit, and
-- equal subtrees are pruned at once (w.s <> w.i).
CREATE FUNCTION idem.json_diff(p_stored jsonb, p_incoming jsonb)
RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    WITH RECURSIVE walk(path, ord, s, i) AS (
        SELECT ''::text, ARRAY[]::text[], p_stored, p_incoming
        UNION ALL
        SELECT w.path || '/' || c.token, w.ord || c.ord, c.s, c.i
        FROM walk w
        CROSS JOIN LATERAL (
            SELECT idem.json_pointer_token(k.key) AS token, k.key AS ord, w.s -> k.key AS s, w.i -> k.key AS i
            FROM (SELECT jsonb_object_keys(CASE WHEN jsonb_typeof(w.s) = 'object' THEN w.s ELSE '{}' END)
                  UNION
                  SELECT jsonb_object_keys(CASE WHEN jsonb_typeof(w.i) = 'object' THEN w.i ELSE '{}' END)) AS k(key)
            WHERE jsonb_typeof(w.s) = 'object' AND jsonb_typeof(w.i) = 'object'
            UNION ALL
            -- Indexes are zero-padded in the sort key so that /10 comes after /9.
            SELECT n::text, lpad(n::text, 10, '0'), w.s -> n, w.i -> n
            FROM generate_series(0, greatest(
                    jsonb_array_length(CASE WHEN jsonb_typeof(w.s) = 'array' THEN w.s ELSE '[]' END),
                    jsonb_array_length(CASE WHEN jsonb_typeof(w.i) = 'array' THEN w.i ELSE '[]' END)) - 1) AS n
            WHERE jsonb_typeof(w.s) = 'array' AND jsonb_typeof(w.i) = 'array'
        ) c
        WHERE w.s <> w.i
    )
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'path', path,
               'change', CASE
                   WHEN s IS NULL THEN 'added'
                   WHEN i IS NULL THEN 'removed'
                   WHEN jsonb_typeof(s) <> jsonb_typeof(i) THEN 'type_changed'
                   ELSE 'changed' END,
               'stored', s,
               'incoming', i) ORDER BY ord COLLATE "C"), '[]'::jsonb)
    FROM walk
    WHERE s IS DISTINCT FROM i
      AND NOT coalesce(jsonb_typeof(s) = 'object' AND jsonb_typeof(i) = 'object', false)
      AND NOT coalesce(jsonb_typeof(s) = 'array' AND jsonb_typeof(i) = 'array', false)
$$;

-- The evidence gains its diff and who detected it; the decision columns stay
-- NULL while the record is open. decided_by is the operator (--operator,
-- IDEMCTL_OPERATOR or the OS user), decided_db_user the database login that
-- took the decision. An accepted record names the new operation it became
-- (same tenant, new_operation_id) and what the executor said (new_outcome).
ALTER TABLE idem.quarantine
    ADD COLUMN diff              jsonb,
    ADD COLUMN detected_operator text,
    ADD COLUMN status            text NOT NULL DEFAULT 'open',
    ADD COLUMN decided_at        timestamptz,
    ADD COLUMN decided_by        text,
    ADD COLUMN decided_db_user   text,
    ADD COLUMN decision_reason   text,
    ADD COLUMN new_operation_id  text,
    ADD COLUMN new_outcome       text,
    ADD COLUMN decision_audit_id bigint;

-- Conflicts recorded before this migration get their diff now, before the
-- evidence becomes immutable.
UPDATE idem.quarantine SET diff = idem.json_diff(stored_payload, incoming_payload);

ALTER TABLE idem.quarantine
    ALTER COLUMN diff SET NOT NULL,
    ADD CONSTRAINT quarantine_status_valid CHECK (status IN ('open', 'rejected', 'accepted')),
    ADD CONSTRAINT quarantine_decision_complete CHECK (CASE status
        WHEN 'open' THEN decided_at IS NULL AND decided_by IS NULL AND decided_db_user IS NULL
             AND decision_reason IS NULL AND new_operation_id IS NULL AND new_outcome IS NULL
             AND decision_audit_id IS NULL
        WHEN 'rejected' THEN decided_at IS NOT NULL AND decided_by IS NOT NULL AND decided_db_user IS NOT NULL
             AND decision_reason IS NOT NULL AND new_operation_id IS NULL AND new_outcome IS NULL
             AND decision_audit_id IS NOT NULL
        ELSE decided_at IS NOT NULL AND decided_by IS NOT NULL AND decided_db_user IS NOT NULL
             AND decision_reason IS NOT NULL AND new_operation_id IS NOT NULL
             AND new_outcome IN ('applied', 'already_applied') AND decision_audit_id IS NOT NULL
        END),
    ADD CONSTRAINT quarantine_new_identity_valid CHECK (
        new_operation_id IS NULL
        OR (idem.identity_problem(tenant_id, new_operation_id) IS NULL AND new_operation_id <> operation_id));

-- `idemctl quarantine list` reads newest activity first with a keyset cursor
-- (last_seen, id). quarantine_last_seen_idx (001) serves --status all; these
-- serve a status, a tenant, and both.
CREATE INDEX quarantine_status_activity_idx ON idem.quarantine (status, last_seen DESC, id DESC);
CREATE INDEX quarantine_tenant_activity_idx ON idem.quarantine (tenant_id, last_seen DESC, id DESC);
CREATE INDEX quarantine_tenant_status_activity_idx ON idem.quarantine (tenant_id, status, last_seen DESC, id DESC);

-- record_conflict (replacing 001's, same signature) keeps the complete evidence,
-- diff included, at conflict time, so that a service calling idem.execute
-- directly leaves a record a person can decide on. detected_operator is set when
-- an operator tool runs the executor (idemctl resolve does
-- SELECT set_config('idem.operator', <operator>, true) in its transaction).
-- A repeat of the same conflict only counts (occurrences, last_seen): it tries
-- the UPDATE first so that a storm of identical retries does not recompute the
-- diff, and falls back to the upsert so that concurrent first occurrences still
-- make one record.
CREATE OR REPLACE FUNCTION idem.record_conflict(
    p_stored idem.inbox, p_op_class text, p_payload jsonb, p_payload_hash text, p_transport jsonb
) RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
    v_id bigint;
BEGIN
    UPDATE idem.quarantine q
    SET occurrences = q.occurrences + 1,
        last_seen = greatest(q.last_seen, now())
    WHERE q.tenant_id = p_stored.tenant_id AND q.operation_id = p_stored.operation_id
      AND q.incoming_hash = p_payload_hash AND q.incoming_class = p_op_class
    RETURNING q.id INTO v_id;
    IF FOUND THEN
        RETURN v_id;
    END IF;
    INSERT INTO idem.quarantine AS q (
        tenant_id, operation_id, incoming_hash, op_class,
        stored_hash, stored_payload, stored_response,
        incoming_class, incoming_payload, incoming_transport,
        diff, detected_app, detected_user, detected_operator
    ) VALUES (
        p_stored.tenant_id, p_stored.operation_id, p_payload_hash, p_stored.op_class,
        p_stored.payload_hash, p_stored.payload, p_stored.response,
        p_op_class, p_payload, p_transport,
        idem.json_diff(p_stored.payload, p_payload),
        current_setting('application_name', true), session_user,
        nullif(current_setting('idem.operator', true), '')
    )
    ON CONFLICT (tenant_id, operation_id, incoming_hash, incoming_class) DO UPDATE
        SET occurrences = q.occurrences + 1,
            last_seen = greatest(q.last_seen, now())
    RETURNING q.id INTO v_id;
    RETURN v_id;
END
$$;

-- The evidence is immutable. Three triggers, each fired only when an UPDATE
-- names its columns in SET (UPDATE OF), so that the upsert of a repeated
-- conflict, which sets only the counters, never reads the payloads (comparing
-- two 1 MB rows on every repeat would cost a second):
--   quarantine_evidence_guard  any UPDATE naming an evidence column is refused,
--                              even one that sets the same value (IX102);
--   quarantine_counter_guard   occurrences and last_seen only move forward;
--   quarantine_decision_guard  the decision columns change once, from open to
--                              rejected or accepted, and only inside
--                              idem.quarantine_reject / _accept_as_new (they set
--                              the transaction-local idem.decision_path).
-- Every column is in exactly one list; a column added by a later migration
-- must be added to one of them (a test checks that none is left out).
-- DELETE and TRUNCATE are refused. This stops mistakes and ad-hoc scripts; a
-- superuser can still disable triggers, which is what the audit chain is for.
CREATE FUNCTION idem.quarantine_refuse()
RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    v_changed text;
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'quarantine record % is evidence and cannot be deleted', OLD.id
            USING ERRCODE = 'IX102',
                  HINT = 'decide it instead: idemctl quarantine reject or accept-as-new';
    END IF;
    IF TG_OP = 'TRUNCATE' THEN
        RAISE EXCEPTION 'idem.quarantine is evidence and cannot be truncated' USING ERRCODE = 'IX102';
    END IF;
    -- Refused whatever the values; name the columns that would have changed.
    SELECT string_agg(key, ', ' ORDER BY key) INTO v_changed
    FROM jsonb_each(to_jsonb(NEW)) n JOIN jsonb_each(to_jsonb(OLD)) o USING (key)
    WHERE n.value IS DISTINCT FROM o.value;
    RAISE EXCEPTION 'quarantine record % evidence is immutable: refused UPDATE of %', OLD.id,
            coalesce(v_changed, 'evidence columns (to the same values)')
        USING ERRCODE = 'IX102';
END
$$;

CREATE FUNCTION idem.quarantine_guard_counters()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF NEW.occurrences < OLD.occurrences OR NEW.last_seen < OLD.last_seen THEN
        RAISE EXCEPTION 'quarantine record %: occurrences and last_seen only move forward', OLD.id
            USING ERRCODE = 'IX102';
    END IF;
    RETURN NEW;
END
$$;

CREATE FUNCTION idem.quarantine_guard_decision()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF (NEW.status, NEW.decided_at, NEW.decided_by, NEW.decided_db_user, NEW.decision_reason,
        NEW.new_operation_id, NEW.new_outcome, NEW.decision_audit_id)
       IS NOT DISTINCT FROM
       (OLD.status, OLD.decided_at, OLD.decided_by, OLD.decided_db_user, OLD.decision_reason,
        OLD.new_operation_id, OLD.new_outcome, OLD.decision_audit_id) THEN
        RETURN NEW;
    END IF;
    IF coalesce(current_setting('idem.decision_path', true), '') <> 'on' THEN
        RAISE EXCEPTION 'quarantine record %: the decision changes only through a decision', OLD.id
            USING ERRCODE = 'IX107',
                  HINT = 'use idemctl quarantine reject / accept-as-new (idem.quarantine_reject, idem.quarantine_accept_as_new)';
    END IF;
    IF OLD.status <> 'open' THEN
        RAISE EXCEPTION 'quarantine record % was already % by % at %', OLD.id, OLD.status, OLD.decided_by, OLD.decided_at
            USING ERRCODE = 'IX103';
    END IF;
    IF NEW.status NOT IN ('rejected', 'accepted') THEN
        RAISE EXCEPTION 'quarantine record %: a decision is rejected or accepted, not %', OLD.id, NEW.status
            USING ERRCODE = 'IX107';
    END IF;
    -- No decision without its audit row, written in this same transaction.
    IF NOT EXISTS (
        SELECT 1 FROM idem.audit a
        WHERE a.id = NEW.decision_audit_id
          AND a.target = 'quarantine:' || OLD.id
          AND a.action = CASE NEW.status WHEN 'rejected' THEN 'quarantine.reject' ELSE 'quarantine.accept_as_new' END
          AND a.at = now()
    ) THEN
        RAISE EXCEPTION 'quarantine record %: a decision needs its audit row from the same transaction', OLD.id
            USING ERRCODE = 'IX107';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER quarantine_evidence_guard
    BEFORE UPDATE OF tenant_id, operation_id, incoming_hash, id, op_class, stored_hash, stored_payload,
        stored_response, incoming_class, incoming_payload, incoming_transport, detected_app, detected_user,
        first_seen, diff, detected_operator
    ON idem.quarantine
    FOR EACH ROW EXECUTE FUNCTION idem.quarantine_refuse();
CREATE TRIGGER quarantine_counter_guard
    BEFORE UPDATE OF occurrences, last_seen ON idem.quarantine
    FOR EACH ROW EXECUTE FUNCTION idem.quarantine_guard_counters();
CREATE TRIGGER quarantine_decision_guard
    BEFORE UPDATE OF status, decided_at, decided_by, decided_db_user, decision_reason, new_operation_id,
        new_outcome, decision_audit_id
    ON idem.quarantine
    FOR EACH ROW EXECUTE FUNCTION idem.quarantine_guard_decision();
CREATE TRIGGER quarantine_no_delete
    BEFORE DELETE ON idem.quarantine
    FOR EACH ROW EXECUTE FUNCTION idem.quarantine_refuse();
CREATE TRIGGER quarantine_no_truncate
    BEFORE TRUNCATE ON idem.quarantine
    FOR EACH STATEMENT EXECUTE FUNCTION idem.quarantine_refuse();

-- The audit log: one row per operator action, append-only, each row chained to
-- the one before by hash. Rows are numbered 1, 2, 3... without gaps (the id is
-- assigned under the head lock, not by a sequence that rollbacks would punch
-- holes in), so a missing number is a deleted row. prev_hash is UNIQUE: two rows
-- can never claim the same predecessor, so the chain cannot fork.
CREATE TABLE idem.audit (
    id        bigint PRIMARY KEY CHECK (id > 0),
    at        timestamptz NOT NULL,
    actor     text NOT NULL CHECK (actor <> '' AND octet_length(actor) <= 256),
    db_user   text NOT NULL,
    action    text NOT NULL
              CHECK (action ~ '^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$' AND octet_length(action) <= 128),
    target    text CHECK (octet_length(target) <= 512),
    details   jsonb NOT NULL DEFAULT '{}'::jsonb,
    prev_hash text NOT NULL UNIQUE,
    hash      text NOT NULL
);

CREATE INDEX audit_action_idx ON idem.audit (action, id);
CREATE INDEX audit_target_idx ON idem.audit (target, id);

-- audit_head is the chain's tip: the last row's id and hash. Appends serialise
-- on its row lock (the audit log is an operator path, not the hot path), and
-- verify compares it with the table's last row, which reveals rows removed from
-- or added at the end behind the log's back.
CREATE TABLE idem.audit_head (
    singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    last_id    bigint NOT NULL,
    last_hash  text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- The genesis hash: the prev_hash of row 1.
CREATE FUNCTION idem.audit_genesis()
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT 'sha256:' || repeat('0', 64) $$;

INSERT INTO idem.audit_head (last_id, last_hash) VALUES (0, idem.audit_genesis());

-- audit_row_hash is sha256 over a canonical serialisation of a row: the jsonb
-- text (deterministic) of [version, id, at in microseconds since the epoch (no
-- time zone involved), actor, db_user, action, target, details, prev_hash].
CREATE FUNCTION idem.audit_row_hash(
    p_id bigint, p_at timestamptz, p_actor text, p_db_user text, p_action text, p_target text,
    p_details jsonb, p_prev_hash text
) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT 'sha256:' || encode(sha256(convert_to(jsonb_build_array(
        'idem.audit/v1', p_id, (extract(epoch FROM p_at) * 1000000)::bigint,
        p_actor, p_db_user, p_action, p_target, p_details, p_prev_hash)::text, 'UTF8')), 'hex')
$$;

-- audit_chain computes every chained field of a new row, whatever the INSERT
-- supplied: the id, the time, the database user, prev_hash and hash. The row
-- lock on audit_head serialises writers; under REPEATABLE READ or SERIALIZABLE a
-- concurrent append makes the later writer fail with 40001 instead of forking.
CREATE FUNCTION idem.audit_chain()
RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    v_head idem.audit_head;
BEGIN
    IF NEW.actor IS NULL OR btrim(NEW.actor) = '' THEN
        RAISE EXCEPTION 'audit entry %: an actor (operator identity) is required', coalesce(NEW.action, 'NULL')
            USING ERRCODE = 'IX111';
    END IF;
    IF NEW.action IS NULL OR NEW.action !~ '^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$' THEN
        RAISE EXCEPTION 'audit entry: action % must be dotted lower-case words (e.g. quarantine.reject)',
                coalesce(quote_literal(NEW.action), 'NULL')
            USING ERRCODE = 'IX111';
    END IF;
    IF NEW.details IS NOT NULL AND jsonb_typeof(NEW.details) <> 'object' THEN
        RAISE EXCEPTION 'audit entry %: details must be a JSON object', NEW.action USING ERRCODE = 'IX111';
    END IF;
    SELECT * INTO v_head FROM idem.audit_head WHERE singleton FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'the audit head is missing: the log has been tampered with (run idemctl audit verify)'
            USING ERRCODE = 'IX112';
    END IF;
    NEW.id := v_head.last_id + 1;
    NEW.at := now();
    NEW.db_user := session_user;
    NEW.details := coalesce(NEW.details, '{}'::jsonb);
    NEW.prev_hash := v_head.last_hash;
    NEW.hash := idem.audit_row_hash(NEW.id, NEW.at, NEW.actor, NEW.db_user, NEW.action, NEW.target,
                                    NEW.details, NEW.prev_hash);
    UPDATE idem.audit_head SET last_id = NEW.id, last_hash = NEW.hash, updated_at = now() WHERE singleton;
    RETURN NEW;
END
$$;

CREATE FUNCTION idem.audit_refuse()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF TG_TABLE_NAME = 'audit_head' AND TG_OP = 'UPDATE' AND pg_trigger_depth() > 1 THEN
        RETURN NEW; -- the append trigger moving the tip
    END IF;
    IF TG_TABLE_NAME = 'audit_head' THEN
        RAISE EXCEPTION 'idem.audit_head moves only when a row is appended to idem.audit (% refused)', TG_OP
            USING ERRCODE = 'IX112';
    END IF;
    RAISE EXCEPTION 'idem.audit is append-only (% refused)', TG_OP
        USING ERRCODE = 'IX110';
END
$$;

CREATE TRIGGER audit_chain BEFORE INSERT ON idem.audit
    FOR EACH ROW EXECUTE FUNCTION idem.audit_chain();
CREATE TRIGGER audit_append_only BEFORE UPDATE OR DELETE ON idem.audit
    FOR EACH ROW EXECUTE FUNCTION idem.audit_refuse();
CREATE TRIGGER audit_append_only_truncate BEFORE TRUNCATE ON idem.audit
    FOR EACH STATEMENT EXECUTE FUNCTION idem.audit_refuse();
CREATE TRIGGER audit_head_guard BEFORE UPDATE OR DELETE ON idem.audit_head
    FOR EACH ROW EXECUTE FUNCTION idem.audit_refuse();
CREATE TRIGGER audit_head_guard_truncate BEFORE TRUNCATE ON idem.audit_head
    FOR EACH STATEMENT EXECUTE FUNCTION idem.audit_refuse();

-- decision_input_problem says what is wrong with an operator or a reason, or NULL.
CREATE FUNCTION idem.decision_input_problem(p_operator text, p_reason text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN p_operator IS NULL OR btrim(p_operator) = '' THEN 'an operator identity is required'
        WHEN octet_length(p_operator) > 256 THEN 'the operator identity is longer than 256 bytes'
        WHEN p_operator ~ '[\x01-\x1f\x7f-\x9f]' THEN 'the operator identity contains a control character'
        WHEN p_reason IS NULL OR btrim(p_reason) = '' THEN 'a reason is required'
        WHEN octet_length(p_reason) > 4096 THEN 'the reason is longer than 4096 bytes'
    END
$$;

-- quarantine_lock_open locks a record for a decision and returns it, or raises
-- when it does not exist (IX101) or is already decided (IX103). Two operators
-- deciding at once queue on the row lock; the second then sees the first's
-- decision and is refused.
CREATE FUNCTION idem.quarantine_lock_open(p_id bigint)
RETURNS idem.quarantine
LANGUAGE plpgsql
AS $$
DECLARE
    v_q idem.quarantine;
BEGIN
    SELECT * INTO v_q FROM idem.quarantine WHERE id = p_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no quarantine record %', coalesce(p_id::text, 'NULL')
            USING ERRCODE = 'IX101', HINT = 'idemctl quarantine list shows the records';
    END IF;
    IF v_q.status <> 'open' THEN
        RAISE EXCEPTION '%', format('quarantine record %s was already %s%s by %s', v_q.id, v_q.status,
                CASE WHEN v_q.status = 'accepted'
                     THEN format(' as new operation %s', quote_literal(v_q.new_operation_id)) ELSE '' END,
                v_q.decided_by)
            USING ERRCODE = 'IX103',
                  DETAIL = format('decided at %s by %s (database user %s): %s',
                                  v_q.decided_at, v_q.decided_by, v_q.decided_db_user, v_q.decision_reason),
                  HINT = 'a decision is final; nothing was changed';
    END IF;
    RETURN v_q;
END
$$;

-- quarantine_reject decides that the conflicting request must never run: the
-- record stays, replays of that payload keep being refused (and counted). The
-- audit row is written here, in the same transaction, so a decision cannot
-- exist without its audit row whoever calls this. Returns the audit row id.
CREATE FUNCTION idem.quarantine_reject(p_id bigint, p_operator text, p_reason text)
RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
    v_problem text;
    v_q       idem.quarantine;
    v_audit   bigint;
BEGIN
    v_problem := idem.decision_input_problem(p_operator, p_reason);
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'reject quarantine record %: %', coalesce(p_id::text, 'NULL'), v_problem
            USING ERRCODE = 'IX104', HINT = 'pass --reason and --operator (or set IDEMCTL_OPERATOR)';
    END IF;
    v_q := idem.quarantine_lock_open(p_id);
    INSERT INTO idem.audit (actor, action, target, details)
    VALUES (p_operator, 'quarantine.reject', 'quarantine:' || v_q.id, jsonb_build_object(
        'quarantine_id', v_q.id, 'tenant_id', v_q.tenant_id, 'operation_id', v_q.operation_id,
        'class', v_q.op_class, 'stored_hash', v_q.stored_hash, 'incoming_hash', v_q.incoming_hash,
        'occurrences', v_q.occurrences, 'reason', p_reason))
    RETURNING id INTO v_audit;
    PERFORM set_config('idem.decision_path', 'on', true);
    UPDATE idem.quarantine
    SET status = 'rejected', decided_at = now(), decided_by = p_operator, decided_db_user = session_user,
        decision_reason = p_reason, decision_audit_id = v_audit
    WHERE id = v_q.id;
    PERFORM set_config('idem.decision_path', 'off', true);
    RETURN v_audit;
END
$$;

-- quarantine_accept_as_new decides that the incoming payload is a legitimate new
-- operation (a settlement revision, a corrected amount) and runs it, through
-- idem.execute, under (tenant_id, p_new_operation_id) with the incoming class,
-- canonical payload and hash, in the caller's transaction. The new inbox row's
-- transport names the quarantine record it came from.
--   applied          the new operation ran now;
--   already_applied  the new identity already held this very payload (it ran
--                    before, e.g. the service resubmitted it): linked, not re-run;
--   NEW holds another payload: refused (IX106) and, because this raises, the
--   whole transaction rolls back: no decision, no audit row, no conflict record
--   for NEW, nothing run.
-- An effect that fails raises its own error, with the same effect: nothing written.
CREATE FUNCTION idem.quarantine_accept_as_new(
    p_id bigint, p_new_operation_id text, p_operator text, p_reason text
) RETURNS TABLE (outcome text, response jsonb, audit_id bigint)
LANGUAGE plpgsql
AS $$
#variable_conflict use_column
DECLARE
    v_problem  text;
    v_q        idem.quarantine;
    v_outcome  text;
    v_response jsonb;
    v_audit    bigint;
BEGIN
    v_problem := idem.decision_input_problem(p_operator, p_reason);
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'accept quarantine record % as new: %', coalesce(p_id::text, 'NULL'), v_problem
            USING ERRCODE = 'IX104', HINT = 'pass --reason and --operator (or set IDEMCTL_OPERATOR)';
    END IF;
    v_q := idem.quarantine_lock_open(p_id);
    v_problem := idem.identity_problem(v_q.tenant_id, p_new_operation_id);
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'invalid new operation id: %', v_problem
            USING ERRCODE = 'IX105',
                  HINT = 'operation_id: 1-256 bytes without control characters';
    END IF;
    IF p_new_operation_id = v_q.operation_id THEN
        RAISE EXCEPTION 'the new operation id must differ from the conflicting one (%)', quote_literal(v_q.operation_id)
            USING ERRCODE = 'IX105',
                  HINT = 'a revision is a new operation with its own identity, e.g. <operation_id>-rev2';
    END IF;
    SELECT e.outcome, e.response INTO v_outcome, v_response
    FROM idem.execute(v_q.tenant_id, p_new_operation_id, v_q.incoming_class, v_q.incoming_payload,
                      v_q.incoming_hash,
                      jsonb_build_object(
                          'accepted_from_quarantine', v_q.id,
                          'original_operation_id', v_q.operation_id,
                          'accepted_by', p_operator)
                      || CASE WHEN v_q.incoming_transport IS NULL THEN '{}'::jsonb
                              ELSE jsonb_build_object('incoming_transport', v_q.incoming_transport) END) e;
    IF v_outcome = 'conflict' THEN
        RAISE EXCEPTION 'operation (%, %) already exists with another payload', quote_literal(v_q.tenant_id),
                quote_literal(p_new_operation_id)
            USING ERRCODE = 'IX106',
                  DETAIL = format('the incoming payload of quarantine record %s has hash %s', v_q.id, v_q.incoming_hash),
                  HINT = 'choose an unused --new-operation-id; nothing was executed or recorded';
    END IF;
    INSERT INTO idem.audit (actor, action, target, details)
    VALUES (p_operator, 'quarantine.accept_as_new', 'quarantine:' || v_q.id, jsonb_build_object(
        'quarantine_id', v_q.id, 'tenant_id', v_q.tenant_id, 'operation_id', v_q.operation_id,
        'new_operation_id', p_new_operation_id, 'class', v_q.incoming_class,
        'stored_hash', v_q.stored_hash, 'incoming_hash', v_q.incoming_hash,
        'occurrences', v_q.occurrences, 'outcome', v_outcome, 'reason', p_reason))
    RETURNING id INTO v_audit;
    PERFORM set_config('idem.decision_path', 'on', true);
    UPDATE idem.quarantine
    SET status = 'accepted', decided_at = now(), decided_by = p_operator, decided_db_user = session_user,
        decision_reason = p_reason, new_operation_id = p_new_operation_id, new_outcome = v_outcome,
        decision_audit_id = v_audit
    WHERE id = v_q.id;
    PERFORM set_config('idem.decision_path', 'off', true);
    RETURN QUERY SELECT v_outcome, v_response, v_audit;
END
$$;
