-- object: function idem.effect_drift()
-- grant: operator, auditor
-- effect_drift lists every registered class whose SQL effect no longer
-- passes the registration's checks (idem.effect_problem) and says why:
-- idem.execute refuses to run those effects (IX016) until the cause is undone
-- or the class is registered again. The name an effect was registered under
-- is read from its audit row, so a function renamed, or another function in
-- its place, is named too. idemctl migrate and idemctl doctor print it.
CREATE OR REPLACE FUNCTION idem.effect_drift()
RETURNS TABLE (op_class text, effect text, problem text)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
    SELECT d.name, d.effect, d.problem
    FROM (
        SELECT c.name, coalesce(reg.effect, c.effect::text) AS effect,
               coalesce(idem.effect_problem(c.effect),
                        CASE WHEN reg.effect IS NOT NULL AND to_regprocedure(reg.effect) IS DISTINCT FROM c.effect
                             THEN 'was renamed or moved, or another function took its name: register the class again' END) AS problem
        FROM idem.op_class c
        LEFT JOIN LATERAL (
            SELECT a.details::jsonb ->> 'effect' AS effect
            FROM idem.audit a
            WHERE a.target = 'class:' || c.name AND a.action = 'class.register'
            ORDER BY a.id DESC LIMIT 1
        ) reg ON true
        WHERE c.effect IS NOT NULL
    ) d
    WHERE d.problem IS NOT NULL
    ORDER BY d.name
$$;
