-- object: trigger pending_claim_completed on idem.pending_claim
DROP TRIGGER IF EXISTS pending_claim_completed ON idem.pending_claim;
CREATE CONSTRAINT TRIGGER pending_claim_completed
AFTER INSERT ON idem.pending_claim
DEFERRABLE INITIALLY DEFERRED
FOR EACH ROW EXECUTE FUNCTION idem.pending_claim_check();
