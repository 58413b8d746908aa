-- Which of the schema's roles the login acts as ($1: owner, app, operator,
-- auditor role names, in that order).
SELECT r.role, pg_has_role(current_user, r.role, 'MEMBER')
FROM unnest($1::text[]) AS r(role)
WHERE EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r.role)
