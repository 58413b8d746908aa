-- The entry plans not yet run (staging, planned, approved, running) that
-- hold identities a dry run found absent, as items still to enter: $1
-- tenant_id, $2 operation_id, parallel arrays; each position held comes
-- back once (1-based), with the first such plan, its kind and state. The
-- real run refuses them (idem.entry_pending_check): such a plan enters the
-- outcome known from outside without its effect. Driven from the (few)
-- plans not yet run, each probed by the key of its items; a staged import
-- plan's stage by idem.entry_pending_staged.
SELECT DISTINCT ON (h.ord) h.ord, h.id, h.kind, h.state
FROM (SELECT k.ord::int4 AS ord, p.id, p.kind, p.state
      FROM idem.entry_plan p
      CROSS JOIN unnest($1::text[], $2::text[]) WITH ORDINALITY AS k(tenant_id, operation_id, ord)
      JOIN idem.entry_item e ON e.plan_id = p.id AND e.tenant_id = k.tenant_id AND e.operation_id = k.operation_id
      WHERE p.state IN ('staging', 'planned', 'approved', 'running') AND e.outcome IS NULL
      UNION ALL
      SELECT s.ord, s.id, s.kind, s.state FROM idem.entry_pending_staged($1::text[], $2::text[]) s) h
ORDER BY h.ord, h.id
