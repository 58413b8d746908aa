-- The demo ledger: accounts per tenant (created on first use), postings, and the
-- effect of the class demo.transfer (retention forever), which posts one
-- transfer. Installed by `idemctl demo init` as the ledger's own role (schema
-- demo and everything in it belong to it; it has no right on schema idem);
-- every statement is safe to run again. This is how a service's team writes
-- and owns an effect: SECURITY DEFINER with a pinned search_path, owned by a
-- role that owns the business tables and nothing of idem, executable by the
-- idem schema owner only.

CREATE TABLE IF NOT EXISTS demo.account (
    tenant_id  text NOT NULL,
    account_id text NOT NULL,
    currency   text NOT NULL,
    balance    bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, account_id)
);

-- No unique key on operation_id here on purpose: the ledger itself does not
-- deduplicate, so a design that runs the effect twice shows up as two postings.
CREATE TABLE IF NOT EXISTS demo.posting (
    tenant_id    text NOT NULL,
    posting_id   uuid NOT NULL DEFAULT gen_random_uuid(),
    operation_id text NOT NULL,
    from_account text NOT NULL,
    to_account   text NOT NULL,
    amount       bigint NOT NULL CHECK (amount > 0),
    currency     text NOT NULL,
    posted_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, posting_id)
);

CREATE INDEX IF NOT EXISTS posting_operation_idx ON demo.posting (tenant_id, operation_id);

-- provider_charge is the fake payment provider of the reference service
-- (idemctl demo serve): it lives outside the service's transaction (its own
-- statements, committed at once, as a remote provider would be) and
-- deduplicates on the key the service derives from (tenant_id, operation_id),
-- as real providers do on an idempotency key.
CREATE TABLE IF NOT EXISTS demo.provider_charge (
    provider_key text PRIMARY KEY,
    tenant_id    text NOT NULL,
    operation_id text NOT NULL,
    amount       bigint NOT NULL,
    currency     text NOT NULL,
    charge_id    uuid NOT NULL DEFAULT gen_random_uuid(),
    charged_at   timestamptz NOT NULL DEFAULT now(),
    requests     integer NOT NULL DEFAULT 1
);

-- transfer_effect validates the payload, posts it and moves both balances.
-- Accounts are locked in account_id order so that A->B and B->A cannot deadlock.
CREATE OR REPLACE FUNCTION demo.transfer_effect(p_tenant_id text, p_operation_id text, p_payload jsonb)
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, demo, pg_temp
AS $$
DECLARE
    v_from     text;
    v_to       text;
    v_currency text;
    v_amount   numeric;
    v_posting  uuid;
    v_from_bal bigint;
    v_to_bal   bigint;
    v_acct     text;
    v_cur      text;
BEGIN
    IF jsonb_typeof(p_payload) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'demo.transfer: payload must be an object' USING ERRCODE = '22023';
    END IF;
    IF jsonb_typeof(p_payload->'from') IS DISTINCT FROM 'string' OR p_payload->>'from' = '' THEN
        RAISE EXCEPTION 'demo.transfer: "from" must be a non-empty string' USING ERRCODE = '22023';
    END IF;
    IF jsonb_typeof(p_payload->'to') IS DISTINCT FROM 'string' OR p_payload->>'to' = '' THEN
        RAISE EXCEPTION 'demo.transfer: "to" must be a non-empty string' USING ERRCODE = '22023';
    END IF;
    IF jsonb_typeof(p_payload->'currency') IS DISTINCT FROM 'string' OR p_payload->>'currency' = '' THEN
        RAISE EXCEPTION 'demo.transfer: "currency" must be a non-empty string' USING ERRCODE = '22023';
    END IF;
    IF jsonb_typeof(p_payload->'amount') IS DISTINCT FROM 'number' THEN
        RAISE EXCEPTION 'demo.transfer: "amount" must be an integer number of minor units' USING ERRCODE = '22023';
    END IF;
    v_from := p_payload->>'from';
    v_to := p_payload->>'to';
    v_currency := p_payload->>'currency';
    v_amount := (p_payload->>'amount')::numeric;
    IF v_amount <> trunc(v_amount) OR v_amount <= 0 OR v_amount > 9223372036854775807 THEN
        RAISE EXCEPTION 'demo.transfer: "amount" must be a positive integer of minor units, got %', p_payload->'amount'
            USING ERRCODE = '22023';
    END IF;
    IF v_from = v_to THEN
        RAISE EXCEPTION 'demo.transfer: "from" and "to" are the same account %', v_from USING ERRCODE = '22023';
    END IF;

    INSERT INTO demo.account (tenant_id, account_id, currency)
    VALUES (p_tenant_id, v_from, v_currency), (p_tenant_id, v_to, v_currency)
    ON CONFLICT DO NOTHING;

    FOR v_acct, v_cur IN
        SELECT a.account_id, a.currency FROM demo.account a
        WHERE a.tenant_id = p_tenant_id AND a.account_id IN (v_from, v_to)
        ORDER BY a.account_id
        FOR UPDATE
    LOOP
        IF v_cur <> v_currency THEN
            RAISE EXCEPTION 'demo.transfer: account % holds %, not %', v_acct, v_cur, v_currency USING ERRCODE = '22023';
        END IF;
    END LOOP;

    UPDATE demo.account SET balance = balance - v_amount::bigint
    WHERE tenant_id = p_tenant_id AND account_id = v_from
    RETURNING balance INTO v_from_bal;
    UPDATE demo.account SET balance = balance + v_amount::bigint
    WHERE tenant_id = p_tenant_id AND account_id = v_to
    RETURNING balance INTO v_to_bal;

    INSERT INTO demo.posting (tenant_id, operation_id, from_account, to_account, amount, currency)
    VALUES (p_tenant_id, p_operation_id, v_from, v_to, v_amount::bigint, v_currency)
    RETURNING posting_id INTO v_posting;

    RETURN jsonb_build_object('posting_id', v_posting, 'from_balance', v_from_bal, 'to_balance', v_to_bal);
END
$$;

REVOKE ALL ON FUNCTION demo.transfer_effect(text, text, jsonb) FROM PUBLIC;
