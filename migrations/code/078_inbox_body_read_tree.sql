-- object: function idem.inbox_body_read_tree(text[], timestamptz[], timestamptz[], integer, integer)
-- inbox_body_read_tree writes the PL/pgSQL of idem.inbox_body_read for the
-- partitions p_parts[p_lo..p_hi] (sorted by their lower bounds p_los, upper
-- bounds p_his): a binary search on p_created_at down to one static probe of
-- one partition's primary key, and of the default partition between them.
CREATE OR REPLACE FUNCTION idem.inbox_body_read_tree(
    p_parts text[], p_los timestamptz[], p_his timestamptz[], p_lo integer, p_hi integer
)
RETURNS text
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v_mid integer := (p_lo + p_hi) / 2;
    v_probe text := $p$
        SELECT b.response INTO response FROM %s b
        WHERE b.tenant_id = p_tenant_id AND b.operation_id = p_operation_id AND b.created_at = p_created_at;$p$;
BEGIN
    IF p_lo > p_hi THEN
        RETURN format(v_probe, 'idem.inbox_body_default');
    END IF;
    RETURN format($t$
    IF p_created_at < %L THEN %s
    ELSIF p_created_at >= %L THEN %s
    ELSE %s
    END IF;$t$,
        p_los[v_mid], idem.inbox_body_read_tree(p_parts, p_los, p_his, p_lo, v_mid - 1),
        p_his[v_mid], idem.inbox_body_read_tree(p_parts, p_los, p_his, v_mid + 1, p_hi),
        format(v_probe, p_parts[v_mid]));
END
$$;
