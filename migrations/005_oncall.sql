-- A purge plan expires: its proof (what the sources held when it was made)
-- grows stale, so an old plan is never approved or started. NULL (plans made
-- before this migration) never expires. idem.horizon_plan_create sets it;
-- idem.horizon_approve and idem.horizon_purge_begin refuse a plan past it
-- (IX315).
ALTER TABLE idem.horizon_plan ADD COLUMN expires_at timestamptz;
