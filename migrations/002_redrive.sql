-- 002_redrive: how a class whose effect lives in a service is re-driven (step 3
-- of the protocol, through the service that owns it), and where re-drives may
-- go.
--
-- op_class.redrive is the class's re-drive configuration (idem.class_redrive_set
-- validates it: an http(s) endpoint or a NATS subject, headers whose secrets
-- are references, never values); downstream_idempotent is the class's word
-- that its service passes a key derived from (tenant_id, operation_id) to
-- every downstream call (a payment provider), without which a re-drive after
-- a crash could charge twice: resolve re-drives only such a class.
ALTER TABLE idem.op_class
    ADD COLUMN redrive jsonb CHECK (redrive IS NULL OR jsonb_typeof(redrive) = 'object'),
    ADD COLUMN downstream_idempotent boolean NOT NULL DEFAULT false;

-- redrive_host: the hosts a re-drive may be sent to. A re-drive URL is a way
-- to send payloads, and credentials, somewhere: only the schema owner changes
-- this list (idem.redrive_allow, idem.redrive_disallow), and every change is
-- in the audit log.
CREATE TABLE idem.redrive_host (
    host       text PRIMARY KEY CHECK (host ~ '^[a-z0-9]([a-z0-9.:-]*[a-z0-9])?$' AND octet_length(host) <= 253),
    created_at timestamptz NOT NULL DEFAULT now(),
    created_by text NOT NULL
);
