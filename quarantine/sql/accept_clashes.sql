-- accept_clashes.sql: the open records of $1 (ids) that cannot run as new
-- operations under $2 (the rule): idem.quarantine_accept_clashes.
SELECT id, tenant_id, operation_id, new_operation_id, problem
FROM idem.quarantine_accept_clashes($1, $2)
ORDER BY id
