-- 006_citus: what a class's effect writes, declared at registration.
--
-- PostgreSQL records no table dependencies of a PL/pgSQL body, and on Citus
-- idem.execute runs a class's effect on the node that holds the tenant's
-- shard: the effect may only touch tables co-located with idem.identity (by
-- tenant_id) or reference tables. A class names its tables when it is
-- registered (idem.register_class, p_tables), the registration checks them on
-- a Citus coordinator, and force_delegation refuses at run time an effect
-- that strays from them. NULL: not declared (a class registered before this
-- migration, or one without a SQL effect); '{}': an effect that touches no
-- table. Names are schema-qualified.
ALTER TABLE idem.op_class
    ADD COLUMN tables text[] CHECK (tables IS NULL OR cardinality(tables) <= 64);
