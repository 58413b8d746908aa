-- The registered operation classes: whether their effect is SQL (which
-- idem.execute can run) or application code (idem.claim/idem.complete only),
-- and, for the latter, how they are re-driven through their service.
SELECT name, effect IS NOT NULL AS sql_effect, redrive, downstream_idempotent FROM idem.op_class
