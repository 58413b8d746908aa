-- object: function idem.import_seal_check(text, jsonb)
-- import_seal_check refuses (IX343) what a seal of an import plan is given
-- about its source when it is malformed: the digest (sha256:<64 hex>) and
-- the counts the planner read (a JSON object of at most 4096 bytes, or
-- NULL). Internal: granted to nobody.
CREATE OR REPLACE FUNCTION idem.import_seal_check(p_source_digest text, p_source_counts jsonb)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
BEGIN
    IF p_source_digest IS NULL OR p_source_digest !~ '^sha256:[0-9a-f]{64}$' THEN
        RAISE EXCEPTION 'import plan: the source digest must be sha256:<64 hex>' USING ERRCODE = 'IX343';
    END IF;
    IF p_source_counts IS NOT NULL AND (jsonb_typeof(p_source_counts) <> 'object' OR octet_length(p_source_counts::text) > 4096) THEN
        RAISE EXCEPTION 'import plan: the source counts are a JSON object of at most 4096 bytes' USING ERRCODE = 'IX343';
    END IF;
END
$$;
