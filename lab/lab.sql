-- Statements every design shares. "scratch." is replaced by the design's
-- scratch schema (idemlab_<run>_<design>) at run time.

-- name: create_accounts
-- Every trial has its own two accounts, created up front: trials never wait on
-- each other, and the lab can lock an account to hold a worker inside its effect.
INSERT INTO scratch.account (tenant_id, account_id, currency)
SELECT t, a, 'EUR' FROM unnest($1::text[], $2::text[]) AS x(t, a)
ON CONFLICT DO NOTHING

-- name: lock_account
SELECT 1 FROM scratch.account WHERE tenant_id = $1 AND account_id = $2 FOR UPDATE

-- name: effect
-- The demo ledger's transfer effect: one posting per call, no dedup of its own.
SELECT scratch.transfer_effect($1, $2, $3::jsonb)

-- name: postings
SELECT tenant_id, operation_id, posting_id::text, amount
FROM scratch.posting
ORDER BY tenant_id, operation_id, posted_at, posting_id
