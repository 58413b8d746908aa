-- object: view idem.tombstone
-- grant: operator, auditor
-- tombstone: identities whose body a purge removed: neither payload nor
-- response, they are gone; the plan that purged them and when.
CREATE OR REPLACE VIEW idem.tombstone AS
SELECT i.tenant_id, i.operation_id,
       'jcs-sha256:' || encode(i.payload_digest, 'hex') AS payload_hash,
       i.op_class, i.created_at, p.id AS purge_plan, p.purge_started_at AS purged_at
FROM idem.identity i
CROSS JOIN LATERAL idem.purged_by(i.tenant_id, i.operation_id, i.op_class, i.created_at) p
WHERE p.id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM idem.inbox_body b
                  WHERE b.tenant_id = i.tenant_id AND b.operation_id = i.operation_id AND b.created_at = i.created_at);
