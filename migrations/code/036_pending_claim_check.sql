-- object: function idem.pending_claim_check()
-- pending_claim_check runs at commit for every claim of the transaction and
-- refuses the commit while one is not completed: a marker without its effect
-- (the brief's first failure mode) can never be committed. Nobody but the
-- schema owner may write idem.pending_claim, so a caller cannot remove its
-- pending claim to slip past it.
CREATE OR REPLACE FUNCTION idem.pending_claim_check()
RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM idem.pending_claim p
               WHERE p.tenant_id = NEW.tenant_id AND p.operation_id = NEW.operation_id) THEN
        RAISE EXCEPTION 'identity (%, %) was claimed but never completed: refusing to commit a marker without its effect',
                NEW.tenant_id, NEW.operation_id
            USING ERRCODE = 'IX009',
                  HINT = 'call idem.complete with the effect''s response before COMMIT';
    END IF;
    RETURN NULL;
END
$$;
