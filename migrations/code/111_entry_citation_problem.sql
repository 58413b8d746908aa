-- object: function idem.entry_citation_problem(text, text, text, text)
-- grant: operator
-- entry_citation_problem says what an entry plan of kind p_kind ('record'
-- or 'import') of class p_class must cite and does not, or NULL. Either
-- kind lets identities in without their effect running, so the same rules
-- hold for both: a money class needs a business contract (p_contract: for
-- an import, the reference the approver checks the imported amounts
-- against); a class with a SQL effect needs p_correction (for a record, the
-- manual correction that writes its ledger rows; for an import, who wrote
-- the effects of the imported operations, which the import does not run).
-- An unknown class is named too. The one rule of idem.entry_plan_create,
-- the import seals, idem.entry_plan_class_check (approve, run) and idemctl
-- import plan before it reads its source. It reads op_class only.
CREATE OR REPLACE FUNCTION idem.entry_citation_problem(p_kind text, p_class text, p_contract text, p_correction text)
RETURNS text
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_money  boolean;
    v_effect boolean;
BEGIN
    SELECT c.money IS NOT NULL, c.effect IS NOT NULL INTO v_money, v_effect FROM idem.op_class c WHERE c.name = p_class;
    IF NOT FOUND THEN
        RETURN format('unknown operation class %s', quote_nullable(p_class));
    END IF;
    IF v_money AND nullif(btrim(p_contract), '') IS NULL THEN
        RETURN CASE p_kind
            WHEN 'import' THEN format('class %s moves money: cite the business contract the approver checks the imported amounts against (--contract)', p_class)
            ELSE format('class %s moves money: cite the business contract (--contract)', p_class) END;
    END IF;
    IF v_effect AND nullif(btrim(p_correction), '') IS NULL THEN
        RETURN CASE p_kind
            WHEN 'import' THEN format('class %s has a SQL effect, which an import does not run: name who wrote the imported operations'' effects, e.g. the old service''s ledger (--correction)', p_class)
            ELSE format('class %s has a SQL effect: its ledger rows are not written by recording; name the manual correction that writes them (--correction)', p_class) END;
    END IF;
    RETURN NULL;
END
$$;
