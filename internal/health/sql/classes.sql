-- Per class: operations in the last hour and day (identities created), bodies
-- the inbox holds and the oldest of them, the last finished purge. It reads
-- the whole inbox body: run it every few minutes, not every second.
WITH recent AS (
    SELECT op_class,
           count(*) FILTER (WHERE created_at > now() - interval '1 hour') AS last_hour,
           count(*) AS last_day
    FROM idem.identity WHERE created_at > now() - interval '1 day' GROUP BY op_class
), bodies AS (
    SELECT op_class, count(*) AS n, min(created_at) AS oldest FROM idem.inbox_body GROUP BY op_class
), purges AS (
    SELECT op_class, max(finished_at) AS at FROM idem.horizon_plan WHERE state = 'done' GROUP BY op_class
)
SELECT c.name, c.retention, coalesce(r.last_hour, 0), coalesce(r.last_day, 0),
       coalesce(b.n, 0), b.oldest, p.at
FROM idem.op_class c
LEFT JOIN recent r ON r.op_class = c.name
LEFT JOIN bodies b ON b.op_class = c.name
LEFT JOIN purges p ON p.op_class = c.name
ORDER BY c.name
