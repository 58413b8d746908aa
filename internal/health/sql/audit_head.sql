-- The audit chain's head and the table's last row: they must agree.
SELECT h.last_id, coalesce((SELECT max(id) FROM idem.audit), 0), h.updated_at
FROM idem.audit_head h
