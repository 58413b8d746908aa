-- What the inbox holds for one identity ($1 tenant, $2 operation): class,
-- hash, creation time, canonical payload, saved response, transport, and the
-- ids of its quarantine records.
SELECT op_class, payload_hash, created_at, payload, response, transport,
       coalesce((SELECT array_agg(q.id ORDER BY q.id) FROM idem.quarantine q
                 WHERE q.tenant_id = i.tenant_id AND q.operation_id = i.operation_id), '{}')
FROM idem.inbox i WHERE tenant_id = $1 AND operation_id = $2
