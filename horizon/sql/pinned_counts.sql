-- How many identities each source of a probe run ($1) pins inside a purge
-- range: identities of class $2 created before the cutoff $3 (live or
-- tombstone: a tombstone that a source can still replay must stay too).
SELECT e.source, count(DISTINCT (e.tenant_id, e.operation_id))
FROM idem.horizon_enum e
JOIN idem.identity i ON i.tenant_id = e.tenant_id AND i.operation_id = e.operation_id
WHERE e.run_id = $1 AND i.op_class = $2 AND i.created_at < $3
GROUP BY e.source
