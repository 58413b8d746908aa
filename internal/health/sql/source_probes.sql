-- Each replay source with its last probe: its evidence in the newest plan
-- that has one (probes are recorded only as plans' proofs).
SELECT s.name, s.kind, p.planned_at, p.verdict
FROM (SELECT 'manual' AS name, 'manual' AS kind UNION ALL SELECT name, kind FROM idem.horizon_source) s
LEFT JOIN LATERAL (
    SELECT hp.planned_at, ev->>'verdict' AS verdict
    FROM idem.horizon_plan hp, jsonb_array_elements(hp.proof) ev
    WHERE ev->>'source' = s.name
    ORDER BY hp.id DESC LIMIT 1
) p ON true
ORDER BY s.name
