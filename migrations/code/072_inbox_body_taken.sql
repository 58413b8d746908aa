-- object: function idem.inbox_body_taken(date, date, timestamptz, timestamptz)
-- inbox_body_taken is true when a partition of idem.inbox_body other than the
-- default overlaps the UTC days [p_from, p_to), or when the default
-- partition's rows (created between p_def_min and p_def_max) do: such days
-- cannot get a partition of their own (idem.inbox_body_ensure).
CREATE OR REPLACE FUNCTION idem.inbox_body_taken(p_from date, p_to date, p_def_min timestamptz, p_def_max timestamptz)
RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT EXISTS (SELECT 1 FROM idem.inbox_body_partitions() p
                   WHERE NOT p.is_default
                     AND (p.lower_bound IS NULL OR p.lower_bound < p_to::timestamp AT TIME ZONE 'UTC')
                     AND (p.upper_bound IS NULL OR p.upper_bound > p_from::timestamp AT TIME ZONE 'UTC'))
        OR (p_def_min IS NOT NULL AND p_def_min < p_to::timestamp AT TIME ZONE 'UTC'
            AND p_def_max >= p_from::timestamp AT TIME ZONE 'UTC')
$$;
