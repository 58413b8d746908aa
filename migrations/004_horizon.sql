-- 004_horizon: inbox purges behind a proven replay horizon, with tombstones.
--
-- The inbox is split in two, so that a purge can empty whole partitions (cheap,
-- almost no WAL) while the uniqueness of an identity keeps living in ONE table:
--
--   idem.identity    one narrow row per identity (tenant_id, operation_id, class,
--                    SHA-256 digest of the canonical payload, created_at). Its
--                    primary key settles every race, purges included: a purge
--                    never deletes it, so after a purge the row IS the tombstone.
--   idem.inbox_body  payload, saved response and transport, partitioned by day
--                    (UTC) of created_at. A purge removes body rows only: a whole
--                    day at once when the day lies before the cutoff (the rows to
--                    keep are set aside, the day's partition truncated and the
--                    kept rows put back), in bounded batches otherwise.
--   idem.inbox       a view with the columns and row type of the former table
--                    (live identities only), insertable and updatable, for
--                    readers and for writers that bypass the functions.
--   idem.tombstone   a view of purged identities: tenant, operation id, payload
--                    hash, class, the purge plan that removed the body and when.
--
-- A claim either finds the identity row (live: its body holds the response;
-- purged: outcome 'purged' for the same payload, a conflict for another), or
-- inserts it. It never finds neither, whatever a purge does at the same instant.
--
-- SQLSTATEs (class IX, range IX301-IX399):
--   IX301 purge plan not found              IX302 plan not in a state for this step
--   IX303 approval by the planner (four-eyes) IX304 forever class without a contract
--   IX305 identity without body and no purge covers it (refused, never re-run)
--   IX306 invalid class policy               IX307 invalid correction
--   IX308 invalid source                     IX309 correction not found or already done

-- The former table keeps its data until it has been copied below.
ALTER TABLE idem.inbox RENAME TO inbox_v1;

CREATE TABLE idem.identity (
    tenant_id      text NOT NULL,
    operation_id   text NOT NULL,
    op_class       text NOT NULL,
    -- The digest of jcs-sha256:<hex>, as 32 bytes: a tombstone is this row, so
    -- every byte here counts (the text form would double it). A new hash
    -- algorithm needs a column naming it.
    payload_digest bytea NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, operation_id),
    CONSTRAINT identity_valid CHECK (
        octet_length(tenant_id) BETWEEN 1 AND 128 AND octet_length(operation_id) BETWEEN 1 AND 256
        AND tenant_id !~ '[\x01-\x1f\x7f-\x9f]' AND operation_id !~ '[\x01-\x1f\x7f-\x9f]'),
    CONSTRAINT identity_digest_form CHECK (octet_length(payload_digest) = 32)
);

-- op_class is repeated here so that a purge picks its rows without a join.
CREATE TABLE idem.inbox_body (
    tenant_id    text NOT NULL,
    operation_id text NOT NULL,
    created_at   timestamptz NOT NULL,
    op_class     text NOT NULL,
    payload      jsonb NOT NULL,
    response     jsonb, -- NULL only inside the claiming transaction (idem.claim)
    transport    jsonb,
    PRIMARY KEY (tenant_id, operation_id, created_at)
) PARTITION BY RANGE (created_at);

-- A summary of the classes in each range of 128 pages (a few bytes per range,
-- nothing to maintain on insert until a range is summarized): a purge finds
-- the rows of other classes in a day without reading the day.
CREATE INDEX inbox_body_class_brin ON idem.inbox_body USING brin (op_class) WITH (autosummarize = on);

-- Rows of a day without its own partition land here (nobody created it in
-- time, or a backdated created_at); purges reach them by batches.
CREATE TABLE idem.inbox_body_default PARTITION OF idem.inbox_body DEFAULT;

-- inbox_body_ensure creates the daily partitions (UTC days) from p_from to p_to
-- that do not exist yet, skipping days the default partition already holds rows
-- for (those stay there). Run by this migration and by every idemctl horizon
-- command; schedule `idemctl horizon maintain` (or this function) daily so that
-- tomorrow always has its partition. Returns how many it created.
CREATE FUNCTION idem.inbox_body_ensure(p_from date, p_to date)
RETURNS integer
LANGUAGE plpgsql
AS $$
DECLARE
    v_day     date := p_from;
    v_made    integer := 0;
    v_def_min timestamptz;
    v_def_max timestamptz;
    v_lo      timestamptz;
    v_hi      timestamptz;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('idem.inbox_body_ensure'));
    SELECT min(created_at), max(created_at) INTO v_def_min, v_def_max FROM idem.inbox_body_default;
    WHILE v_day <= p_to LOOP
        v_lo := v_day::timestamp AT TIME ZONE 'UTC';
        v_hi := (v_day + 1)::timestamp AT TIME ZONE 'UTC';
        IF NOT EXISTS (
               SELECT 1 FROM idem.inbox_body_partitions() p
               WHERE p.lower_bound < v_hi AND (p.upper_bound IS NULL OR p.upper_bound > v_lo) AND NOT p.is_default)
           AND NOT (v_def_min IS NOT NULL AND v_def_min < v_hi AND v_def_max >= v_lo) THEN
            EXECUTE format('CREATE TABLE idem.%I PARTITION OF idem.inbox_body FOR VALUES FROM (%L) TO (%L)',
                           'inbox_body_p' || to_char(v_day, 'YYYYMMDD'), v_lo, v_hi);
            v_made := v_made + 1;
        END IF;
        v_day := v_day + 1;
    END LOOP;
    RETURN v_made;
END
$$;

-- inbox_body_partitions lists the body's partitions with their bounds (lower
-- NULL for MINVALUE, upper NULL for MAXVALUE), the default one flagged.
CREATE FUNCTION idem.inbox_body_partitions()
RETURNS TABLE (part regclass, lower_bound timestamptz, upper_bound timestamptz, is_default boolean)
LANGUAGE sql STABLE
AS $$
    SELECT c.oid::regclass,
           CASE WHEN b.expr ~ 'FROM \(MINVALUE\)' THEN NULL
                ELSE substring(b.expr FROM $re$FROM \('([^']*)'\)$re$)::timestamptz END,
           CASE WHEN b.expr ~ 'TO \(MAXVALUE\)' THEN NULL
                ELSE substring(b.expr FROM $re$TO \('([^']*)'\)$re$)::timestamptz END,
           b.expr = 'DEFAULT'
    FROM pg_inherits h
    JOIN pg_class c ON c.oid = h.inhrelid
    CROSS JOIN LATERAL (SELECT pg_get_expr(c.relpartbound, c.oid) AS expr) b
    WHERE h.inhparent = 'idem.inbox_body'::regclass
$$;

-- Existing rows move over: a partition per day they cover (days older than 400
-- days share one partition from MINVALUE, so that an old inbox does not become
-- thousands of tables), then today and the week ahead.
DO $$
DECLARE
    v_min   date;
    v_floor date := current_date - 400;
    v_day   date;
BEGIN
    SELECT min((created_at AT TIME ZONE 'UTC')::date) INTO v_min FROM idem.inbox_v1;
    IF v_min IS NOT NULL AND v_min < v_floor THEN
        EXECUTE format('CREATE TABLE idem.inbox_body_before_%s PARTITION OF idem.inbox_body FOR VALUES FROM (MINVALUE) TO (%L)',
                       to_char(v_floor, 'YYYYMMDD'), v_floor::timestamp AT TIME ZONE 'UTC');
    END IF;
    FOR v_day IN
        SELECT DISTINCT (created_at AT TIME ZONE 'UTC')::date FROM idem.inbox_v1
        WHERE created_at >= v_floor::timestamp AT TIME ZONE 'UTC'
    LOOP
        PERFORM idem.inbox_body_ensure(v_day, v_day);
    END LOOP;
    PERFORM idem.inbox_body_ensure((now() AT TIME ZONE 'UTC')::date, (now() AT TIME ZONE 'UTC')::date + 7);
END
$$;

INSERT INTO idem.identity (tenant_id, operation_id, op_class, payload_digest, created_at)
SELECT tenant_id, operation_id, op_class, decode(substr(payload_hash, 12), 'hex'), created_at FROM idem.inbox_v1;
INSERT INTO idem.inbox_body (tenant_id, operation_id, created_at, op_class, payload, response, transport)
SELECT tenant_id, operation_id, created_at, op_class, payload, response, transport FROM idem.inbox_v1;

-- record_conflict takes a row of idem.inbox; it moves to the view's row type.
DROP FUNCTION idem.record_conflict(idem.inbox_v1, text, jsonb, text, jsonb);
DROP TABLE idem.inbox_v1;

CREATE VIEW idem.inbox AS
SELECT i.tenant_id, i.operation_id, i.op_class,
       'jcs-sha256:' || encode(i.payload_digest, 'hex') AS payload_hash,
       b.payload, b.response, i.created_at, b.transport
FROM idem.identity i
JOIN idem.inbox_body b
  ON b.tenant_id = i.tenant_id AND b.operation_id = i.operation_id AND b.created_at = i.created_at;

COMMENT ON VIEW idem.inbox IS
    'Live identities with payload and saved response (idem.identity + idem.inbox_body). Purged ones are in idem.tombstone.';

-- Writers that bypass the functions (tests, bulk loads) write through the view
-- and are held to the same rules: the identity CHECKs, and the hash form.
CREATE FUNCTION idem.inbox_write()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.payload_hash IS NULL OR NEW.payload_hash !~ '^jcs-sha256:[0-9a-f]{64}$' THEN
            RAISE EXCEPTION 'invalid payload hash %: want jcs-sha256:<64 lowercase hex>', coalesce(quote_literal(NEW.payload_hash), 'NULL')
                USING ERRCODE = '23514', CONSTRAINT = 'inbox_hash_form';
        END IF;
        NEW.created_at := coalesce(NEW.created_at, now());
        INSERT INTO idem.identity (tenant_id, operation_id, op_class, payload_digest, created_at)
        VALUES (NEW.tenant_id, NEW.operation_id, NEW.op_class, decode(substr(NEW.payload_hash, 12), 'hex'), NEW.created_at);
        INSERT INTO idem.inbox_body (tenant_id, operation_id, created_at, op_class, payload, response, transport)
        VALUES (NEW.tenant_id, NEW.operation_id, NEW.created_at, NEW.op_class, NEW.payload, NEW.response, NEW.transport);
        RETURN NEW;
    ELSIF TG_OP = 'UPDATE' THEN
        IF (NEW.tenant_id, NEW.operation_id, NEW.op_class, NEW.payload_hash, NEW.created_at)
           IS DISTINCT FROM (OLD.tenant_id, OLD.operation_id, OLD.op_class, OLD.payload_hash, OLD.created_at) THEN
            RAISE EXCEPTION 'an identity, its class, hash and created_at never change' USING ERRCODE = '23514';
        END IF;
        UPDATE idem.inbox_body b
        SET payload = NEW.payload, response = NEW.response, transport = NEW.transport
        WHERE b.tenant_id = OLD.tenant_id AND b.operation_id = OLD.operation_id AND b.created_at = OLD.created_at;
        RETURN NEW;
    END IF;
    DELETE FROM idem.inbox_body b
    WHERE b.tenant_id = OLD.tenant_id AND b.operation_id = OLD.operation_id AND b.created_at = OLD.created_at;
    DELETE FROM idem.identity i WHERE i.tenant_id = OLD.tenant_id AND i.operation_id = OLD.operation_id;
    RETURN OLD;
END
$$;

CREATE TRIGGER inbox_write INSTEAD OF INSERT OR UPDATE OR DELETE ON idem.inbox
    FOR EACH ROW EXECUTE FUNCTION idem.inbox_write();

-- record_conflict, as in 002, now taking the view's row type.
CREATE FUNCTION idem.record_conflict(
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

-- ---------------------------------------------------------------------------
-- Horizon: class policy, replay sources, corrections, plans, pins.

-- Sources other than 'manual' (built in). config holds the kind's settings,
-- secrets included (a DSN): idemctl never prints it unredacted.
CREATE TABLE idem.horizon_source (
    name       text PRIMARY KEY
               CHECK (name ~ '^[a-z0-9][a-z0-9_.-]*$' AND octet_length(name) <= 64 AND name <> 'manual'),
    kind       text NOT NULL CHECK (kind IN ('postgres', 'archive', 'nats', 'kafka')),
    config     jsonb NOT NULL CHECK (jsonb_typeof(config) = 'object'),
    timeout    interval NOT NULL DEFAULT '30 seconds' CHECK (timeout > interval '0'),
    created_at timestamptz NOT NULL DEFAULT now(),
    created_by text NOT NULL
);

-- Pending manual corrections: operations someone may still replay by hand.
-- They are the 'manual' source, and pin their identities.
CREATE TABLE idem.horizon_correction (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id    text NOT NULL,
    operation_id text NOT NULL,
    reason       text NOT NULL CHECK (btrim(reason) <> '' AND octet_length(reason) <= 4096),
    created_at   timestamptz NOT NULL DEFAULT now(),
    created_by   text NOT NULL,
    done_at      timestamptz,
    done_by      text,
    CONSTRAINT correction_identity_valid CHECK (idem.identity_problem(tenant_id, operation_id) IS NULL),
    CONSTRAINT correction_done_complete CHECK ((done_at IS NULL) = (done_by IS NULL))
);
CREATE INDEX horizon_correction_pending_idx ON idem.horizon_correction (tenant_id, operation_id) WHERE done_at IS NULL;

-- A plan: what a purge may remove (class, cutoff) and the proof it rests on
-- (the evidence of every source, in proof). action 'drop_tombstones' is a
-- second proof that removes the tombstones themselves (horizon classes only).
CREATE TABLE idem.horizon_plan (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    op_class         text NOT NULL,
    action           text NOT NULL DEFAULT 'purge' CHECK (action IN ('purge', 'drop_tombstones')),
    state            text NOT NULL DEFAULT 'planned'
                     CHECK (state IN ('planned', 'approved', 'purging', 'done', 'aborted')),
    retention        text NOT NULL CHECK (retention IN ('forever', 'horizon')),
    min_age          interval,
    contract         text CHECK (contract IS NULL OR (btrim(contract) <> '' AND octet_length(contract) <= 512)),
    before           timestamptz NOT NULL,
    cutoff           timestamptz NOT NULL,
    margin           interval NOT NULL,
    planned_at       timestamptz NOT NULL DEFAULT now(),
    planned_by       text NOT NULL,
    approved_at      timestamptz,
    approved_by      text,
    purge_started_at timestamptz,
    finished_at      timestamptz,
    aborted_at       timestamptz,
    abort_reason     text,
    candidates       bigint NOT NULL,
    pinned           bigint NOT NULL,
    purged           bigint NOT NULL DEFAULT 0,
    batches          integer NOT NULL DEFAULT 0,
    proof            jsonb NOT NULL,
    CONSTRAINT plan_forever_contract CHECK (retention <> 'forever' OR (contract IS NOT NULL AND action = 'purge')),
    CONSTRAINT plan_four_eyes CHECK (approved_by IS NULL OR approved_by <> planned_by)
);
CREATE INDEX horizon_plan_class_idx ON idem.horizon_plan (op_class, id);

-- Identities a plan must not purge: enumerated by a source (or held by an open
-- or rejected quarantine record) at plan time, inside the plan's range.
CREATE TABLE idem.horizon_pin (
    plan_id      bigint NOT NULL REFERENCES idem.horizon_plan (id),
    tenant_id    text NOT NULL,
    operation_id text NOT NULL,
    source       text NOT NULL,
    PRIMARY KEY (plan_id, tenant_id, operation_id)
);

-- What enumerating probes stream while they run (one run per check, plan or
-- re-probe), read back in SQL and deleted: never all held in memory.
CREATE UNLOGGED TABLE idem.horizon_enum (
    run_id       uuid NOT NULL,
    source       text NOT NULL,
    tenant_id    text NOT NULL,
    operation_id text NOT NULL,
    ts           timestamptz
);
CREATE INDEX horizon_enum_run_idx ON idem.horizon_enum (run_id, tenant_id, operation_id);

-- One row per purge transaction: progress for a resume, evidence afterwards,
-- and how long each held its locks.
CREATE TABLE idem.horizon_batch (
    plan_id     bigint NOT NULL REFERENCES idem.horizon_plan (id),
    seq         integer NOT NULL,
    part        text NOT NULL,
    method      text NOT NULL CHECK (method IN ('swap', 'batch', 'tombstones')),
    rows        bigint NOT NULL,
    kept        bigint NOT NULL DEFAULT 0,
    started_at  timestamptz NOT NULL,
    finished_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (plan_id, seq)
);

-- horizon_approve records the second pair of eyes: the approver must not be
-- the planner, and only a planned plan is approved.
CREATE FUNCTION idem.horizon_approve(p_plan bigint, p_operator text)
RETURNS idem.horizon_plan
LANGUAGE plpgsql
AS $$
DECLARE
    v_p idem.horizon_plan;
BEGIN
    SELECT * INTO v_p FROM idem.horizon_plan WHERE id = p_plan FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no purge plan % (idemctl horizon status lists the plans)', coalesce(p_plan::text, 'NULL') USING ERRCODE = 'IX301';
    END IF;
    IF v_p.state <> 'planned' THEN
        RAISE EXCEPTION 'purge plan % is %, not planned', v_p.id, v_p.state USING ERRCODE = 'IX302';
    END IF;
    IF p_operator IS NULL OR btrim(p_operator) = '' THEN
        RAISE EXCEPTION 'an operator identity is required' USING ERRCODE = 'IX303';
    END IF;
    IF p_operator = v_p.planned_by THEN
        RAISE EXCEPTION 'purge plan % was planned by %: another operator must approve it (four-eyes)', v_p.id, v_p.planned_by
            USING ERRCODE = 'IX303';
    END IF;
    UPDATE idem.horizon_plan SET state = 'approved', approved_at = now(), approved_by = p_operator
    WHERE id = p_plan RETURNING * INTO v_p;
    RETURN v_p;
END
$$;

-- A body row is a purge candidate of a plan when it is of the plan's class,
-- before its cutoff, older than the class's min_age now, not pinned by the
-- plan, and has no open or rejected quarantine record (a replay of a rejected
-- payload must keep meeting its record). The predicate is written out in each
-- statement below (anti-joins the planner can hash), not hidden in a function
-- called once per row.

-- horizon_purge_swap empties one partition that lies wholly before the
-- cutoff in one short transaction: the rows to keep (other classes, pinned,
-- quarantined) are copied aside into a temporary table (no WAL), the partition
-- is truncated (no per-row WAL, no dead tuples, no parent lock: only this
-- day's partition is locked, nobody writes a past day) and the kept rows go
-- back. When more than p_keep_ratio of the rows would be kept, it does nothing
-- (swapped false) and the caller deletes by batches instead.
-- TRUNCATE is not MVCC-safe: a REPEATABLE READ transaction whose snapshot
-- predates the swap sees the kept rows as gone, so it may answer 'purged' for
-- a pinned identity; it still never runs it again (the identity row stays).
-- READ COMMITTED callers, the executor's default, see the kept rows.
CREATE FUNCTION idem.horizon_purge_swap(
    p_plan bigint, p_part regclass, p_keep_ratio float8,
    OUT purged bigint, OUT kept bigint, OUT swapped boolean
)
LANGUAGE plpgsql
AS $$
DECLARE
    v_p     idem.horizon_plan;
    v_hi    timestamptz;
    v_total bigint;
BEGIN
    SELECT * INTO v_p FROM idem.horizon_plan WHERE id = p_plan;
    SELECT upper_bound INTO v_hi FROM idem.inbox_body_partitions() WHERE part = p_part AND NOT is_default;
    IF v_hi IS NULL OR v_hi > v_p.cutoff THEN
        RAISE EXCEPTION 'partition % does not lie wholly before the cutoff %', p_part, v_p.cutoff USING ERRCODE = 'IX302';
    END IF;
    -- A day that the class's min-age still protects in part goes by batches.
    IF v_hi > now() - coalesce(v_p.min_age, interval '0') THEN
        purged := 0;
        kept := 0;
        swapped := false;
        RETURN;
    END IF;
    -- Writers of this partition (other purges) wait; readers do not.
    EXECUTE format('LOCK TABLE %s IN SHARE MODE', p_part);
    -- The rows to keep, found without reading the whole day: other classes
    -- through the BRIN summary (op_class < C OR op_class > C), pinned and
    -- quarantined identities through the primary key.
    EXECUTE format($q$CREATE TEMPORARY TABLE horizon_keep ON COMMIT DROP AS
        SELECT b.* FROM %1$s b
        WHERE b.op_class < $2 OR b.op_class > $2
        UNION ALL
        SELECT b.* FROM %1$s b
        WHERE b.op_class = $2
          AND (b.tenant_id, b.operation_id) IN (
                SELECT x.tenant_id, x.operation_id FROM idem.horizon_pin x WHERE x.plan_id = $1
                UNION
                SELECT q.tenant_id, q.operation_id FROM idem.quarantine q
                WHERE q.op_class = $2 AND q.status IN ('open', 'rejected'))$q$,
        p_part)
        USING v_p.id, v_p.op_class;
    GET DIAGNOSTICS kept = ROW_COUNT;
    EXECUTE format('SELECT count(*) FROM %s', p_part) INTO v_total;
    IF kept > p_keep_ratio * v_total THEN
        DROP TABLE horizon_keep;
        purged := 0;
        swapped := false;
        RETURN;
    END IF;
    EXECUTE format('TRUNCATE %s', p_part);
    IF kept > 0 THEN
        EXECUTE format('INSERT INTO %s SELECT * FROM horizon_keep', p_part);
    END IF;
    DROP TABLE horizon_keep;
    purged := v_total - kept;
    swapped := true;
END
$$;

-- horizon_purge_blocks deletes the candidates among heap blocks
-- [p_from_block, p_to_block) of one partition (a TID range scan: each batch
-- reads only its own blocks). Returns how many rows it deleted.
CREATE FUNCTION idem.horizon_purge_blocks(p_plan bigint, p_part regclass, p_from_block bigint, p_to_block bigint)
RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
    v_p idem.horizon_plan;
    v_n bigint;
BEGIN
    SELECT * INTO v_p FROM idem.horizon_plan WHERE id = p_plan;
    EXECUTE format($q$DELETE FROM %s b
        WHERE b.ctid >= format('(%%s,0)', $5::bigint)::tid AND b.ctid < format('(%%s,0)', $6::bigint)::tid
          AND b.op_class = $2 AND b.created_at < $3 AND b.created_at < now() - coalesce($4, interval '0')
          AND NOT EXISTS (SELECT 1 FROM idem.horizon_pin x
                          WHERE x.plan_id = $1 AND x.tenant_id = b.tenant_id AND x.operation_id = b.operation_id)
          AND NOT EXISTS (SELECT 1 FROM idem.quarantine q
                          WHERE q.tenant_id = b.tenant_id AND q.operation_id = b.operation_id
                            AND q.status IN ('open', 'rejected'))$q$, p_part)
        USING v_p.id, v_p.op_class, v_p.cutoff, v_p.min_age, p_from_block, p_to_block;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    RETURN v_n;
END
$$;

-- horizon_drop_tombstones_blocks deletes, among heap blocks of idem.identity,
-- the tombstones a drop_tombstones plan covers: purged (no body), of its class,
-- before its cutoff, not pinned, no open or rejected quarantine record.
CREATE FUNCTION idem.horizon_drop_tombstones_blocks(p_plan bigint, p_from_block bigint, p_to_block bigint)
RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
    v_p idem.horizon_plan;
    v_n bigint;
BEGIN
    SELECT * INTO v_p FROM idem.horizon_plan WHERE id = p_plan;
    IF v_p.retention <> 'horizon' OR v_p.action <> 'drop_tombstones' THEN
        RAISE EXCEPTION 'plan % does not drop tombstones of a horizon class', p_plan USING ERRCODE = 'IX302';
    END IF;
    DELETE FROM idem.identity i
    WHERE i.ctid >= format('(%s,0)', p_from_block)::tid AND i.ctid < format('(%s,0)', p_to_block)::tid
      AND i.op_class = v_p.op_class AND i.created_at < v_p.cutoff
      AND i.created_at < now() - coalesce(v_p.min_age, interval '0')
      AND NOT EXISTS (SELECT 1 FROM idem.horizon_pin x
                      WHERE x.plan_id = v_p.id AND x.tenant_id = i.tenant_id AND x.operation_id = i.operation_id)
      AND NOT EXISTS (SELECT 1 FROM idem.quarantine q
                      WHERE q.tenant_id = i.tenant_id AND q.operation_id = i.operation_id
                        AND q.status IN ('open', 'rejected'))
      AND NOT EXISTS (SELECT 1 FROM idem.inbox_body b
                      WHERE b.tenant_id = i.tenant_id AND b.operation_id = i.operation_id AND b.created_at = i.created_at);
    GET DIAGNOSTICS v_n = ROW_COUNT;
    RETURN v_n;
END
$$;

-- purged_by names the purge that removed an identity's body: the first plan of
-- its class, by purge start, whose cutoff lies after it and that did not pin it.
CREATE FUNCTION idem.purged_by(p_tenant_id text, p_operation_id text, p_op_class text, p_created_at timestamptz)
RETURNS idem.horizon_plan
LANGUAGE sql STABLE
AS $$
    SELECT p.* FROM idem.horizon_plan p
    WHERE p.op_class = p_op_class AND p.action = 'purge' AND p.purge_started_at IS NOT NULL
      AND p_created_at < p.cutoff
      AND NOT EXISTS (SELECT 1 FROM idem.horizon_pin x
                      WHERE x.plan_id = p.id AND x.tenant_id = p_tenant_id AND x.operation_id = p_operation_id)
    ORDER BY p.purge_started_at, p.id
    LIMIT 1
$$;

-- Tombstones: identities whose body a purge removed. Neither payload nor
-- response: they are gone.
CREATE VIEW idem.tombstone AS
SELECT i.tenant_id, i.operation_id,
       'jcs-sha256:' || encode(i.payload_digest, 'hex') AS payload_hash,
       i.op_class, i.created_at, p.id AS purge_plan, p.purge_started_at AS purged_at
FROM idem.identity i
CROSS JOIN LATERAL idem.purged_by(i.tenant_id, i.operation_id, i.op_class, i.created_at) p
WHERE p.id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM idem.inbox_body b
                  WHERE b.tenant_id = i.tenant_id AND b.operation_id = i.operation_id AND b.created_at = i.created_at);

-- record_tombstone_conflict quarantines a request that reuses a purged
-- identity with another payload or class. The stored payload and response are
-- gone: the evidence keeps the stored hash and class, stored_payload is JSON
-- null, and the diff says the stored side was purged, by which plan and when.
CREATE FUNCTION idem.record_tombstone_conflict(
    p_id idem.identity, p_op_class text, p_payload jsonb, p_payload_hash text, p_transport jsonb
) RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
    v_id   bigint;
    v_plan idem.horizon_plan;
BEGIN
    UPDATE idem.quarantine q
    SET occurrences = q.occurrences + 1, last_seen = greatest(q.last_seen, now())
    WHERE q.tenant_id = p_id.tenant_id AND q.operation_id = p_id.operation_id AND q.incoming_hash = p_payload_hash
      AND q.incoming_class = p_op_class
    RETURNING q.id INTO v_id;
    IF FOUND THEN
        RETURN v_id;
    END IF;
    v_plan := idem.purged_by(p_id.tenant_id, p_id.operation_id, p_id.op_class, p_id.created_at);
    INSERT INTO idem.quarantine AS q (
        tenant_id, operation_id, incoming_hash, op_class,
        stored_hash, stored_payload, stored_response,
        incoming_class, incoming_payload, incoming_transport,
        diff, detected_app, detected_user, detected_operator
    ) VALUES (
        p_id.tenant_id, p_id.operation_id, p_payload_hash, p_id.op_class,
        'jcs-sha256:' || encode(p_id.payload_digest, 'hex'), 'null'::jsonb, NULL,
        p_op_class, p_payload, p_transport,
        jsonb_build_array(jsonb_build_object(
            'path', '', 'change', 'stored_purged', 'stored', NULL, 'incoming', p_payload,
            'purge_plan', v_plan.id, 'purged_at', v_plan.purge_started_at,
            'note', 'the stored payload and response were purged under a proven replay horizon; only the stored hash and class remain')),
        current_setting('application_name', true), session_user,
        nullif(current_setting('idem.operator', true), '')
    )
    ON CONFLICT (tenant_id, operation_id, incoming_hash, incoming_class) DO UPDATE
        SET occurrences = q.occurrences + 1, last_seen = greatest(q.last_seen, now())
    RETURNING q.id INTO v_id;
    RETURN v_id;
END
$$;

-- settle is claim_checked's body, with a choice for idem.execute: p_with_body
-- false claims the identity row alone, and the caller inserts the body with
-- its response after the effect (one insert instead of an insert and an update).
--   'claimed'          the identity is new and this transaction holds its row;
--   'already_applied'  same hash and class, body present: the saved response;
--   'purged'           same hash and class, purged under a proven horizon: it
--                      was applied, the response is no longer kept (NULL);
--   'conflict'         another hash or class: quarantined, nothing runs.
-- The identity row is never deleted by a purge, so the primary key settles a
-- claim racing a purge too: the claimer meets the row, live or tombstone.
CREATE FUNCTION idem.settle(
    p_tenant_id text, p_operation_id text, p_op_class text, p_payload jsonb, p_payload_hash text,
    p_transport jsonb, p_with_body boolean, OUT outcome text, OUT response jsonb, OUT quarantine_id bigint
)
LANGUAGE plpgsql
AS $$
#variable_conflict use_column
DECLARE
    v_digest bytea := decode(substr(p_payload_hash, 12), 'hex');
    v_id     idem.identity;
    v_row    idem.inbox;
BEGIN
    FOR attempt IN 1..3 LOOP
        INSERT INTO idem.identity (tenant_id, operation_id, op_class, payload_digest)
        VALUES (p_tenant_id, p_operation_id, p_op_class, v_digest)
        ON CONFLICT (tenant_id, operation_id) DO NOTHING;
        IF FOUND THEN
            IF p_with_body THEN
                INSERT INTO idem.inbox_body (tenant_id, operation_id, created_at, op_class, payload, transport)
                VALUES (p_tenant_id, p_operation_id, now(), p_op_class, p_payload, p_transport);
            END IF;
            outcome := 'claimed';
            RETURN;
        END IF;
        -- The row is committed (READ COMMITTED waited for its writer). Lock it so
        -- that its tombstone cannot be dropped while this transaction answers.
        SELECT * INTO v_id FROM idem.identity i
        WHERE i.tenant_id = p_tenant_id AND i.operation_id = p_operation_id
        FOR KEY SHARE;
        IF FOUND THEN
            SELECT b.payload, b.response, b.transport INTO v_row.payload, v_row.response, v_row.transport
            FROM idem.inbox_body b
            WHERE b.tenant_id = p_tenant_id AND b.operation_id = p_operation_id AND b.created_at = v_id.created_at;
            IF FOUND THEN
                IF v_id.payload_digest = v_digest AND v_id.op_class = p_op_class THEN
                    outcome := 'already_applied';
                    response := v_row.response;
                ELSE
                    v_row.tenant_id := v_id.tenant_id;
                    v_row.operation_id := v_id.operation_id;
                    v_row.op_class := v_id.op_class;
                    v_row.payload_hash := 'jcs-sha256:' || encode(v_id.payload_digest, 'hex');
                    v_row.created_at := v_id.created_at;
                    outcome := 'conflict';
                    quarantine_id := idem.record_conflict(v_row, p_op_class, p_payload, p_payload_hash, p_transport);
                END IF;
                RETURN;
            END IF;
            -- No body: a tombstone, but only if a purge covers it. Anything
            -- else is damage, refused rather than run again.
            IF NOT EXISTS (SELECT 1 FROM idem.horizon_plan p
                           WHERE p.op_class = v_id.op_class AND p.action = 'purge'
                             AND p.purge_started_at IS NOT NULL AND v_id.created_at < p.cutoff) THEN
                RAISE EXCEPTION 'identity (%, %) has no stored payload and no purge covers it', p_tenant_id, p_operation_id
                    USING ERRCODE = 'IX305',
                          HINT = 'its inbox body was removed outside idemctl horizon; nothing was run';
            END IF;
            IF v_id.payload_digest = v_digest AND v_id.op_class = p_op_class THEN
                outcome := 'purged';
            ELSE
                outcome := 'conflict';
                quarantine_id := idem.record_tombstone_conflict(v_id, p_op_class, p_payload, p_payload_hash, p_transport);
            END IF;
            RETURN;
        END IF;
        -- The row went away between the insert and the read (a dropped
        -- tombstone): settle again.
    END LOOP;
    RAISE EXCEPTION 'identity (%, %) could not be settled; retry', p_tenant_id, p_operation_id
        USING ERRCODE = 'IX007';
END
$$;

-- claim_checked keeps its signature (001); it now settles through idem.settle
-- and claims the identity with its body (response NULL until idem.complete).
CREATE OR REPLACE FUNCTION idem.claim_checked(
    p_tenant_id text, p_operation_id text, p_op_class text, p_payload jsonb, p_payload_hash text,
    p_transport jsonb, OUT outcome text, OUT response jsonb, OUT quarantine_id bigint
)
LANGUAGE sql
AS $$
    SELECT s.outcome, s.response, s.quarantine_id
    FROM idem.settle(p_tenant_id, p_operation_id, p_op_class, p_payload, p_payload_hash, p_transport, true) s
$$;

-- idem.complete (001) is left as it is: its UPDATE of idem.inbox goes through
-- the view's trigger to the body row that idem.claim wrote.

-- execute as in 001, outcome 'purged' added: claim the identity row, run the
-- effect, then write the body with its response in one insert.
CREATE OR REPLACE FUNCTION idem.execute(
    p_tenant_id text, p_operation_id text, p_op_class text, p_payload jsonb, p_payload_hash text,
    p_transport jsonb DEFAULT NULL
) RETURNS TABLE (outcome text, response jsonb)
LANGUAGE plpgsql
AS $$
#variable_conflict use_column
DECLARE
    v_claim record;
BEGIN
    IF idem.check_request(p_tenant_id, p_operation_id, p_op_class, p_payload, p_payload_hash) IS NULL THEN
        RAISE EXCEPTION 'class % has its effect in application code', p_op_class
            USING ERRCODE = 'IX004',
                  HINT = 'call idem.claim, run the effect, then idem.complete in one transaction';
    END IF;
    v_claim := idem.settle(p_tenant_id, p_operation_id, p_op_class, p_payload, p_payload_hash, p_transport, false);
    IF v_claim.outcome <> 'claimed' THEN
        outcome := v_claim.outcome;
        response := v_claim.response;
        RETURN NEXT;
        RETURN;
    END IF;
    response := coalesce(idem.run_effect(p_op_class, p_tenant_id, p_operation_id, p_payload), 'null'::jsonb);
    INSERT INTO idem.inbox_body (tenant_id, operation_id, created_at, op_class, payload, response, transport)
    VALUES (p_tenant_id, p_operation_id, now(), p_op_class, p_payload, execute.response, p_transport);
    outcome := 'applied';
    RETURN NEXT;
END
$$;
