-- Plans, newest first; $1 one id or NULL for all, $2 a class or NULL.
SELECT id, op_class, action, state, retention, coalesce(extract(epoch FROM min_age), 0)::float8,
       coalesce(contract, ''), before, cutoff, extract(epoch FROM margin)::float8,
       planned_at, planned_by, planned_person, planned_db_user,
       approved_at, coalesce(approved_by, ''), coalesce(approved_person, ''), coalesce(approved_db_user, ''),
       purge_started_at, finished_at, aborted_at, coalesce(aborted_by, ''), coalesce(abort_reason, ''),
       candidates, pinned, purged, batches, proof, expires_at,
       coalesce(ran_person, runner_person, ''), coalesce(ran_db_user, runner_login, ''),
       -- what holds the pins: each source, quarantine (one holder an identity)
       (SELECT coalesce(jsonb_agg(jsonb_build_object('held_by', x.source, 'identities', x.n) ORDER BY x.n DESC, x.source), '[]')
        FROM (SELECT source, count(*) AS n FROM idem.horizon_pin WHERE plan_id = horizon_plan.id GROUP BY source) x)
FROM idem.horizon_plan
WHERE ($1::bigint IS NULL OR id = $1) AND ($2::text IS NULL OR op_class = $2)
ORDER BY id DESC
LIMIT $3
