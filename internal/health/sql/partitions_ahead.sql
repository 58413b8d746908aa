-- How far ahead the inbox body's daily partitions reach, on the primary's
-- clock (NULL when there is none but the default one), and how many rows
-- the default partition holds (estimate; -1 never analyzed).
SELECT (SELECT max(upper_bound) FROM idem.inbox_body_partitions() WHERE NOT is_default),
       now(),
       (SELECT c.reltuples::float8 FROM pg_class c WHERE c.oid = 'idem.inbox_body_default'::regclass)
