-- A new plan, counts filled in once its pins are recorded.
INSERT INTO idem.horizon_plan (op_class, action, retention, min_age, contract, before, cutoff, margin,
                               planned_by, candidates, pinned, proof)
VALUES ($1, $2, $3, make_interval(secs => $4::float8), $5, $6, $7, make_interval(secs => $8::float8), $9, 0, 0, $10)
RETURNING id, planned_at
