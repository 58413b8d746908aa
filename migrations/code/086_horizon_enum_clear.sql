-- object: function idem.horizon_enum_clear(uuid)
-- grant: operator
-- horizon_enum_clear forgets what probe run p_run enumerated.
CREATE OR REPLACE FUNCTION idem.horizon_enum_clear(p_run uuid)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$ BEGIN DELETE FROM idem.horizon_enum WHERE run_id = p_run; END $$;
