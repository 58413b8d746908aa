-- 018_governed_weakening: two more changes that weaken a proof become
-- governed changes that another person approves: making a forever class
-- (money) horizon (class_retention: idem.class_set), and marking a pending
-- manual correction applied, which takes its pin out of every purge proof
-- made afterwards (correction_done: idem.horizon_correction_done).
ALTER TABLE idem.governed_change
    DROP CONSTRAINT governed_change_kind_check,
    ADD CONSTRAINT governed_change_kind_check
        CHECK (kind IN ('class_money', 'source_remove', 'class_retention', 'correction_done'));
