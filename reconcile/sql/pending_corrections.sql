-- The reasons of the pending manual corrections of a batch of identities
-- ($1 tenant_id[], $2 operation_id[]): reconcile --pin skips a discrepancy
-- already pinned with the same reason (the same report, line and finding),
-- so that running the same reconcile again pins nothing twice.
SELECT c.tenant_id, c.operation_id, c.reason
FROM unnest($1::text[], $2::text[]) AS k(tenant_id, operation_id)
JOIN idem.horizon_correction c
  ON c.tenant_id = k.tenant_id AND c.operation_id = k.operation_id AND c.done_at IS NULL
