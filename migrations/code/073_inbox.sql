-- object: view idem.inbox
-- grant: operator, auditor
-- inbox: live identities with their canonical payload text and saved response
-- (idem.identity joined with idem.inbox_body). Read-only: every write goes
-- through idem.execute, idem.claim and idem.complete. Purged identities are in
-- idem.tombstone.
CREATE OR REPLACE VIEW idem.inbox AS
SELECT i.tenant_id, i.operation_id, i.op_class,
       'jcs-sha256:' || encode(i.payload_digest, 'hex') AS payload_hash,
       b.payload, b.response, i.created_at, b.transport, b.holds
FROM idem.identity i
JOIN idem.inbox_body b
  ON b.tenant_id = i.tenant_id AND b.operation_id = i.operation_id AND b.created_at = i.created_at;
