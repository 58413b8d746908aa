-- 021_identity_checks_drop: the three CHECKs 020 replaces (identity_valid,
-- identity_digest_form, holds >= 0), read from their node text at every
-- INSERT or UPDATE statement.
ALTER TABLE idem.identity DROP CONSTRAINT identity_valid, DROP CONSTRAINT identity_digest_form, DROP CONSTRAINT identity_holds_check;
