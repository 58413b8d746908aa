-- Run first in the lookup's transaction: whatever the statistics say of how
-- many identities a key matches, the batched lookup (lookup.sql) is planned
-- as a nested loop over the keys with one primary-key probe of each table
-- per key. An over-estimate once chose a merge join that read every day
-- partition of idem.inbox_body whole for a batch of 5,000 keys (1.7 s where
-- the probes take 0.25 s). Disabled plan shapes stay possible only where no
-- other exists, and an index on the key always does.
SELECT set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true),
       set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true),
       set_config('enable_material', 'off', true)
