-- The quarantine record of a provider's answer to this payload under this
-- identity ($1 tenant, $2 operation, $3 incoming hash, $4 incoming class):
-- the provider refused the key (422) while nothing here held it. Its id and
-- status; no row when there is none.
SELECT id, status FROM idem.quarantine
WHERE tenant_id = $1 AND operation_id = $2 AND incoming_hash = $3 AND incoming_class = $4 AND holds_on = 'provider'
