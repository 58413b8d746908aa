-- 017_import_stage: an import plan may stage its items in the database
-- (off Citus). The planner copies the canonical rows into an unlogged table
-- of the schema owner's made for the plan, idem.import_stage_<plan id>
-- (idem.import_plan_stage_open: the planner's login may only INSERT into
-- it, and only until the seal); idem.import_plan_seal_stage takes that grant
-- back, checks every row and computes the plan's digest, counts and sample
-- itself: the approver approves the server's digest of exactly what will
-- enter, and nobody but the schema owner can change it afterwards. The run
-- reads the stage, not the source: in chunks (counts.chunk_rows staged rows
-- each), each chunk its own transaction that records itself here, so that
-- a killed run resumes where it stopped and nothing enters twice.
--
-- staged: the plan's items are in its stage (idem.import_stage_<id>,
-- dropped when the run is done).
ALTER TABLE idem.entry_plan
    ADD COLUMN staged boolean NOT NULL DEFAULT false,
    ADD CONSTRAINT entry_plan_staged_import CHECK (NOT staged OR (kind = 'import' AND items_digest IS NOT NULL));

-- import_chunk: the chunks of a staged import's run that committed: which
-- staged rows (first_n..last_n), what entered and what was left alone
-- (skipped, quarantined, refused: their item rows), who ran it and when. A
-- chunk's row commits with its identities and bodies, in one transaction;
-- the key refuses a chunk run twice.
CREATE TABLE idem.import_chunk (
    plan_id    bigint NOT NULL,
    chunk      integer NOT NULL CHECK (chunk >= 0),
    first_n    bigint NOT NULL CHECK (first_n >= 1),
    last_n     bigint NOT NULL CHECK (last_n >= first_n),
    entered    bigint CHECK (entered >= 0),
    left_alone bigint CHECK (left_alone >= 0),
    run_by     text NOT NULL,
    person     text NOT NULL,
    db_user    text NOT NULL,
    done_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (plan_id, chunk)
);
