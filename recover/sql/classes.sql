-- The registered operation classes and whether their effect is SQL (which
-- idem.execute can run) or application code (idem.claim/idem.complete only).
SELECT name, effect IS NOT NULL AS sql_effect FROM idem.op_class
