-- The standbys streaming from this server: their sync state (NULL when this
-- login may not see it: pg_monitor), and whether commits wait for them.
SELECT coalesce(application_name, ''), sync_state,
       current_setting('synchronous_standby_names'), current_setting('synchronous_commit')
FROM pg_stat_replication
