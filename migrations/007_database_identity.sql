-- 007_database_identity: which database a service recorded into. A random id
-- stamped once, when this migration runs, so that a service can tell resolve
-- (idem.database_id(), the Idem-Database response header) where it wrote: a
-- service of another environment listening on the same address records into
-- another database, and resolve must not read that as a service that skips
-- its inbox. The id is random rather than the cluster's system identifier,
-- which every physical clone shares and which says more than needed; the
-- function adds a digest of the database's name, so that a copy made with
-- CREATE DATABASE ... TEMPLATE under another name differs too.
CREATE TABLE idem.database_identity (
    one        boolean PRIMARY KEY DEFAULT true CHECK (one),
    id         text NOT NULL CHECK (id ~ '^[0-9a-f]{32}$'),
    stamped_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO idem.database_identity (id) VALUES (replace(gen_random_uuid()::text, '-', ''));
