-- Rows of one partition (filled in with its regclass) and how many lie in a
-- plan's range (class $1, before cutoff $2, older than min_age $3 seconds).
-- Pins are few and not counted here: this only chooses between swapping the
-- partition and deleting by batches; the purge itself counts exactly.
SELECT count(*),
       count(*) FILTER (WHERE b.op_class = $1 AND b.created_at < $2
                          AND b.created_at < now() - make_interval(secs => $3::float8))
FROM %s b
