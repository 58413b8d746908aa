-- 020_identity_row_valid_add: idem.identity's one CHECK (019), NOT VALID:
-- every row written from now on is checked; the rows already there are
-- validated by 022 without blocking writes.
ALTER TABLE idem.identity ADD CONSTRAINT identity_row_valid
    CHECK (idem.identity_row_valid(tenant_id, operation_id, payload_digest, holds)) NOT VALID;
