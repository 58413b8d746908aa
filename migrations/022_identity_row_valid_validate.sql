-- 022_identity_row_valid_validate: the rows written before 020 are checked
-- against its constraint, in a transaction of their own. VALIDATE CONSTRAINT
-- takes SHARE UPDATE EXCLUSIVE: the executor keeps inserting while it reads
-- the whole table (020 and 021 took ACCESS EXCLUSIVE only for their catalogue changes).
-- The rows passed the same rules under the constraints 021 dropped, so this
-- fails only on a table changed by hand.
ALTER TABLE idem.identity VALIDATE CONSTRAINT identity_row_valid;
