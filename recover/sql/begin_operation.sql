-- Step 1 again, inside the writing transaction of one operation, in the same
-- round trip that names the operator for the conflict record
-- (idem.record_conflict reads current_setting('idem.operator', true)).
-- set_config(..., true) lasts until the end of this transaction only.
SELECT pg_is_in_recovery() AS in_recovery,
       current_setting('transaction_read_only') = 'on' AS read_only,
       set_config('idem.operator', $1, true) AS operator
