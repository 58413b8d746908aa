-- object: function idem.bulk_preview_create(text, bigint[], jsonb)
-- grant: operator
-- bulk_preview_create stores the exact set of quarantine records a bulk
-- preview showed (p_ids, the open ones; p_selection how they were chosen)
-- and returns its token: a bulk decision acts only on that set
-- (idem.bulk_preview_take), once, by the same person, within the hour. The
-- login must map to a person (IX313).
CREATE OR REPLACE FUNCTION idem.bulk_preview_create(p_action text, p_ids bigint[], p_selection jsonb)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    v_person text := idem.require_person('preview a bulk decision');
    v_token  text := 'pv-' || replace(gen_random_uuid()::text, '-', '');
BEGIN
    INSERT INTO idem.bulk_preview (token, action, ids, selection, person, db_user, expires_at)
    VALUES (v_token, p_action, (SELECT array_agg(DISTINCT u ORDER BY u) FROM unnest(p_ids) u),
            coalesce(p_selection, '{}'::jsonb), v_person, session_user, now() + interval '1 hour');
    RETURN v_token;
END
$$;
