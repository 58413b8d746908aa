-- 010_quarantine_provider_answer: a quarantine record whose stored side is
-- a provider's answer (issue 27, item 6).
--
-- A re-drive the provider (or the service) answered 422, "this key was used
-- with another payload", while the inbox holds no identity: the key was used
-- at the provider, not here. The conflict is as real as one against an inbox
-- row, but nothing here holds the other side; its evidence is the provider's
-- answer (status, body, where it was sent) and the payload sent. Such a
-- record holds on nothing (holds_on 'provider'), has no stored hash (the
-- provider's payload is unknown) and keeps the answer in stored_response. It
-- is written only by idem.quarantine_provider_answer (operators; audited)
-- and decided like any other record.
ALTER TABLE idem.quarantine DROP CONSTRAINT quarantine_holds_on_check;
ALTER TABLE idem.quarantine ADD CONSTRAINT quarantine_holds_on_check
    CHECK (holds_on IN ('body', 'identity', 'provider'));
ALTER TABLE idem.quarantine ALTER COLUMN stored_hash DROP NOT NULL;
ALTER TABLE idem.quarantine DROP CONSTRAINT quarantine_hash_form;
ALTER TABLE idem.quarantine ADD CONSTRAINT quarantine_hash_form CHECK (
    incoming_hash ~ '^jcs-sha256:[0-9a-f]{64}$'
    AND CASE WHEN holds_on = 'provider'
             THEN stored_hash IS NULL AND stored_payload IS NULL
                  AND jsonb_typeof(stored_response -> 'status') = 'number'
                  AND jsonb_typeof(stored_response -> 'body') = 'string'
             ELSE stored_hash IS NOT NULL AND stored_hash ~ '^jcs-sha256:[0-9a-f]{64}$' END);
