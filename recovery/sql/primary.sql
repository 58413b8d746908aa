-- Step 1 of the recovery protocol, before a run: is this the authoritative
-- primary? A standby is in recovery (and can lag: "not found" there proves
-- nothing); a read-only session cannot settle anything. Also returns the
-- database clock, which stamps the run.
SELECT pg_is_in_recovery() AS in_recovery,
       current_setting('transaction_read_only') = 'on' AS read_only,
       clock_timestamp() AS now
