-- object: function idem.timeline_switch()
-- grant: operator, auditor
-- timeline_switch says on which WAL timeline this primary writes and when it
-- switched to it: the modification time of the timeline's history file
-- (pg_wal/NNNNNNNN.history), which the server writes when it is promoted.
-- A commit acknowledged by an old primary and not yet streamed to the
-- promoted standby is lost at that moment (asynchronous replication).
-- switched_at is NULL on timeline 1 (never promoted) and when the history
-- file is gone (a primary rebuilt from a backup); readable is false when
-- the schema owner may not list pg_wal (idemctl migrate, run as a superuser,
-- grants it pg_ls_waldir(): the file names and times, never their content).
CREATE OR REPLACE FUNCTION idem.timeline_switch(OUT timeline integer, OUT switched_at timestamptz, OUT readable boolean)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
BEGIN
    timeline := ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::integer;
    readable := true;
    IF timeline > 1 THEN
        BEGIN
            SELECT w.modification INTO switched_at FROM pg_ls_waldir() w
            WHERE w.name = lpad(upper(to_hex(timeline)), 8, '0') || '.history';
        EXCEPTION WHEN insufficient_privilege THEN
            readable := false;
        END;
    END IF;
END
$$;
