-- What the inbox held when a conflict was recorded: the stored hash and class,
-- read from the quarantine record just written in the same transaction.
SELECT stored_hash, op_class FROM idem.quarantine WHERE id = $1
