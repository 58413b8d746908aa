-- object: function idem.citus_on_every_node(regprocedure)
-- citus_on_every_node is true when Citus creates p_fn on every node (a
-- distributed function, so that a delegated idem.execute finds it on the
-- worker), and always off Citus.
CREATE OR REPLACE FUNCTION idem.citus_on_every_node(p_fn regprocedure)
RETURNS boolean
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    IF NOT idem.citus_distributed() THEN
        RETURN true;
    END IF;
    RETURN EXISTS (SELECT 1 FROM pg_catalog.pg_dist_object o
                   WHERE o.classid = 'pg_proc'::regclass AND o.objid = p_fn);
END
$$;
