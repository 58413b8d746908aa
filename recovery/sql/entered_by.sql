-- Whether an identity the executor answered already_applied was entered by
-- an entry plan without its effect ($1 tenant, $2 operation): the plan, and
-- how (transport entered_by: "import", else recorded by hand). No row, or a
-- NULL plan: it was applied.
SELECT i.entry_plan, b.transport ->> 'entered_by'
FROM idem.identity i
LEFT JOIN idem.inbox_body b ON b.tenant_id = i.tenant_id AND b.operation_id = i.operation_id AND b.created_at = i.created_at
WHERE i.tenant_id = $1 AND i.operation_id = $2 AND i.entry_plan IS NOT NULL
