-- Open quarantine records: how many, and when the oldest was first seen.
SELECT count(*), min(first_seen), now() FROM idem.quarantine WHERE status = 'open'
