-- 023_governed_min_age: lowering (or removing) a class's min-age floor lets a
-- purge reach identities the floor protected, so it becomes a governed change
-- that another person approves, like making a forever class horizon
-- (class_min_age: idem.class_set; idem.governed_change_approve applies it).
-- Raising the floor stays one person's act.
ALTER TABLE idem.governed_change
    DROP CONSTRAINT governed_change_kind_check,
    ADD CONSTRAINT governed_change_kind_check
        CHECK (kind IN ('class_money', 'source_remove', 'class_retention', 'correction_done', 'class_min_age'));
