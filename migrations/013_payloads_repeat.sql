-- 013_payloads_repeat: a class may declare that its payloads legitimately
-- repeat (a projection's tick, a daily total): idemctl suspects leaves it
-- out unless asked for it by name. Declared by one operator with a reason
-- (idem.class_repeats_set, audited); it weakens a detector, not a proof.
ALTER TABLE idem.op_class
    ADD COLUMN payloads_repeat boolean NOT NULL DEFAULT false;
