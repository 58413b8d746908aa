-- Step 1 again, inside the writing transaction of one operation: raises IX201
-- (standby) or IX202 (read-only) and names the operator for the conflict
-- record (idem.assert_primary), and reads the primary's clock (a re-drive
-- that follows compares the identity's creation time with it). Sent in one
-- pipeline with BEGIN, the executor call and COMMIT; an error skips the rest
-- of the pipeline.
SELECT idem.assert_primary($1), clock_timestamp()
