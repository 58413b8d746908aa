-- ids_status.sql: the records of an explicit list of ids (ids on stdin), for
-- a bulk decision's preview: which exist and where each stands.
SELECT q.id, q.status FROM idem.quarantine q WHERE q.id = ANY(@ids::bigint[])
