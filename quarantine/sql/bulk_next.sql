-- bulk_next.sql: the next batch of a bulk decision: open records matching
-- filter.sql (@status is 'open', @max_id the preview's), in id order after
-- @after_id. Decided records leave the open set, so a rerun of an interrupted
-- run finds exactly what is left.
SELECT q.id
FROM idem.quarantine q
WHERE /*FILTER*/
  AND q.id > @after_id::bigint
ORDER BY q.id
LIMIT @limit::integer
