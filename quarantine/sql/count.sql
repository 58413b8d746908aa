-- count.sql: how many records match filter.sql, counted up to @cap (a count
-- of @cap means "at least"), and the first_seen of the oldest open one among
-- them (quarantine_open_first_seen_idx).
SELECT (SELECT count(*) FROM (SELECT 1 FROM idem.quarantine q WHERE /*FILTER*/ LIMIT @cap::bigint) capped),
       (SELECT q.first_seen FROM idem.quarantine q
        WHERE q.status = 'open' AND /*FILTER*/
        ORDER BY q.first_seen, q.id LIMIT 1)
