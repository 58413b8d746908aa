-- The purge that removed one identity's body ($1 tenant, $2 operation); the
-- audit row of its plan's start is looked up by target (recovery.History).
SELECT t.purged_at AS at, 6 AS ord, 'purged' AS event,
       format('body removed by purge plan %s; the identity stays as a tombstone (a replay is answered purged)', t.purge_plan) AS detail,
       NULL::bigint AS audit_id, 'horizon_plan:' || t.purge_plan AS audit_target, 'horizon.purge.start' AS audit_action
FROM idem.tombstone t WHERE t.tenant_id = $1 AND t.operation_id = $2
