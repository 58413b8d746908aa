-- object: function idem.snapshot_predates_swap()
-- grant: operator, auditor
-- snapshot_predates_swap is true when the last purge swap of a day partition
-- (idem.horizon_purge_swap) did not complete before the caller's snapshot was
-- taken, unless it rolled back: a body missing in that snapshot may be a kept
-- row it cannot see, so "purged" cannot be concluded from it. A swap still
-- running counts too (an earlier swap may have committed after the snapshot;
-- swaps are serialised, so it committed before this one started). STABLE, so
-- that it judges the calling statement's snapshot.
CREATE OR REPLACE FUNCTION idem.snapshot_predates_swap()
RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
    SELECT s.last_value > 0
       AND NOT pg_visible_in_snapshot(s.last_value::text::xid8, pg_current_snapshot())
       AND pg_xact_status(s.last_value::text::xid8) IS DISTINCT FROM 'aborted'
    FROM idem.body_swap_xid s
$$;
