package migrations

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Roles names the four roles of the schema. All are NOLOGIN group roles:
// grant them to login roles (GRANT idem_app TO payments_service).
type Roles struct {
	// Owner owns schema idem and every object in it; it is never a
	// superuser. Nobody else writes an idem table directly.
	Owner string `json:"owner"`
	// App may call idem.execute, idem.claim and idem.complete: services.
	App string `json:"app"`
	// Operator may do what idemctl does for a person: resolve, quarantine
	// decisions, corrections, horizon plan, approve, purge, class policies.
	Operator string `json:"operator"`
	// Auditor reads the audit log and the evidence.
	Auditor string `json:"auditor"`
}

// DefaultRoles are idem_owner, idem_app, idem_operator and idem_auditor.
func DefaultRoles() Roles { return RolesWithPrefix("idem") }

// RolesWithPrefix names the roles PREFIX_owner, PREFIX_app, PREFIX_operator
// and PREFIX_auditor.
func RolesWithPrefix(prefix string) Roles {
	return Roles{Owner: prefix + "_owner", App: prefix + "_app", Operator: prefix + "_operator", Auditor: prefix + "_auditor"}
}

var roleNameRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// Validate checks that the names are plain lower-case identifiers, all different.
func (r Roles) Validate() error {
	seen := map[string]bool{}
	for _, n := range r.list() {
		if !roleNameRE.MatchString(n) {
			return fmt.Errorf("%w: role name %q: lower-case letters, digits and _, at most 63", ErrNotInstallable, n)
		}
		if seen[n] {
			return fmt.Errorf("%w: role %q named twice", ErrNotInstallable, n)
		}
		seen[n] = true
	}
	return nil
}

func (r Roles) list() []string { return []string{r.Owner, r.App, r.Operator, r.Auditor} }

// kind maps a code file's grant kind (app, operator, auditor) to its role.
func (r Roles) kind(k string) (string, bool) {
	switch k {
	case "app":
		return r.App, true
	case "operator":
		return r.Operator, true
	case "auditor":
		return r.Auditor, true
	}
	return "", false
}

// prepare checks that the database can take the schema and creates what only
// a privileged login can: the roles and schema idem owned by the owner role.
// It returns the roles it created.
func prepare(ctx context.Context, conn *pgx.Conn, r Roles) ([]string, error) {
	var encoding string
	var standby bool
	if err := conn.QueryRow(ctx, "SELECT pg_encoding_to_char(encoding), pg_is_in_recovery() FROM pg_database WHERE datname = current_database()").
		Scan(&encoding, &standby); err != nil {
		return nil, fmt.Errorf("read database: %w", err)
	}
	if standby {
		return nil, fmt.Errorf("%w: the server is a standby; migrate the primary", ErrNotInstallable)
	}
	if encoding != "UTF8" {
		return nil, fmt.Errorf("%w: the database encoding is %s, not UTF8 (payload hashes are over UTF-8 text)", ErrNotInstallable, encoding)
	}
	// A superuser among the schema's roles is refused first: the roles never
	// are, whatever else is wrong.
	var super *string
	if err := conn.QueryRow(ctx, "SELECT min(rolname) FROM pg_roles WHERE rolname = ANY($1) AND rolsuper", r.list()).Scan(&super); err != nil {
		return nil, err
	}
	if super != nil {
		return nil, fmt.Errorf("%w: role %s is a superuser; the schema's roles never are", ErrNotInstallable, *super)
	}
	// A schema installed for other roles is refused next, naming its
	// owner, before any role is created or granted (an operator's run on a
	// schema of prefixed roles named idem_owner, which it had nothing to do
	// with).
	var schemaOwner *string
	if err := conn.QueryRow(ctx, "SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = 'idem'").Scan(&schemaOwner); err != nil &&
		!errors.Is(err, pgx.ErrNoRows) {
		return nil, err
	}
	if schemaOwner != nil && *schemaOwner != r.Owner {
		return nil, otherOwner(*schemaOwner, r.Owner)
	}
	var created []string
	for _, name := range r.list() {
		var exists, super bool
		if err := conn.QueryRow(ctx, "SELECT count(*) > 0, coalesce(bool_or(rolsuper), false) FROM pg_roles WHERE rolname = $1", name).
			Scan(&exists, &super); err != nil {
			return created, err
		}
		if exists && super {
			return created, fmt.Errorf("%w: role %s is a superuser; the schema's roles never are", ErrNotInstallable, name)
		}
		if exists {
			continue
		}
		if _, err := conn.Exec(ctx, "CREATE ROLE "+pgx.Identifier{name}.Sanitize()+" NOLOGIN"); err != nil {
			return created, fmt.Errorf("%w: create role %s (migrate needs a superuser or a role with CREATEROLE the first time): %v",
				ErrNotInstallable, name, err)
		}
		created = append(created, name)
	}
	owner := pgx.Identifier{r.Owner}.Sanitize()
	var member bool
	if err := conn.QueryRow(ctx, "SELECT pg_has_role(current_user, $1, 'MEMBER')", r.Owner).Scan(&member); err != nil {
		return created, err
	}
	if !member {
		if _, err := conn.Exec(ctx, "GRANT "+owner+" TO CURRENT_USER"); err != nil {
			return created, fmt.Errorf("%w: %s may not act as the owner role %s: %v", ErrNotInstallable, "this login", r.Owner, err)
		}
	}
	if schemaOwner == nil {
		if _, err := conn.Exec(ctx, "CREATE SCHEMA idem AUTHORIZATION "+owner); err != nil {
			return created, fmt.Errorf("%w: create schema idem: %v", ErrNotInstallable, err)
		}
	}
	return created, nil
}

// otherOwner is the refusal of a schema owned by another role than the one
// this run would own it with; it names the --role-prefix that matches when
// the owner is named like the schema's roles (PREFIX_owner).
func otherOwner(actual, want string) error {
	hint := "a schema from before the baseline, or other roles: migrate with its --role-prefix, or drop it"
	if prefix, ok := strings.CutSuffix(actual, "_owner"); ok && prefix != "" {
		hint = "installed for the roles " + prefix + "_*: migrate with --role-prefix " + prefix
	}
	return fmt.Errorf("%w: schema idem exists and is owned by %s, not %s (%s)", ErrNotInstallable, actual, want, hint)
}

// Installed reads the schema version (the newest migration applied) and the
// code package version of conn's database; ok is false when they cannot be
// read (no schema, or a login that may not read them).
func Installed(ctx context.Context, conn *pgx.Conn) (schema, code int, ok bool) {
	if _, err := conn.Exec(ctx, "RESET ROLE"); err != nil {
		return 0, 0, false
	}
	err := conn.QueryRow(ctx, `SELECT (SELECT max(version) FROM idem.schema_migrations),
		coalesce((SELECT version FROM idem.code_package), 0)`).Scan(&schema, &code)
	return schema, code, err == nil && schema > 0
}

// checkVersions refuses a database whose schema or code package is newer
// than this binary, or installed for other roles.
func checkVersions(ctx context.Context, conn *pgx.Conn, all []Migration, r Roles) error {
	var newest int
	if err := conn.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM idem.schema_migrations").Scan(&newest); err != nil {
		return fmt.Errorf("read migration history: %w", err)
	}
	if newest > SchemaVersion() {
		return fmt.Errorf("%w: it holds migration %03d, this binary knows up to %03d: use a newer idemctl",
			ErrSchemaNewer, newest, SchemaVersion())
	}
	var version int
	var roles []byte
	err := conn.QueryRow(ctx, "SELECT version, roles FROM idem.code_package").Scan(&version, &roles)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read code package: %w", err)
	}
	if version > CodeVersion {
		return fmt.Errorf("%w: its code package is version %d, this binary installs version %d: use a newer idemctl",
			ErrSchemaNewer, version, CodeVersion)
	}
	var installed Roles
	if err := json.Unmarshal(roles, &installed); err != nil {
		return fmt.Errorf("read code package roles: %w", err)
	}
	if installed != r {
		return fmt.Errorf("%w: the schema was installed for roles %s, %s, %s, %s; migrate with the same --role-prefix",
			ErrNotInstallable, installed.Owner, installed.App, installed.Operator, installed.Auditor)
	}
	return nil
}

// InstalledRoles returns the roles the schema in conn's database was
// installed for (DefaultRoles when it records none).
func InstalledRoles(ctx context.Context, conn interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}) (Roles, error) {
	var raw []byte
	err := conn.QueryRow(ctx, "SELECT roles FROM idem.code_package").Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return DefaultRoles(), nil
	}
	if err != nil {
		return Roles{}, fmt.Errorf("read the schema's roles: %w", err)
	}
	var r Roles
	if err := json.Unmarshal(raw, &r); err != nil {
		return Roles{}, fmt.Errorf("read the schema's roles: %w", err)
	}
	return r, nil
}

// ErrNotOwner: the login cannot act as the schema owner role (only a
// superuser, or a member of the owner role, changes what only the owner may:
// persons, classes, the re-drive allow-list).
var ErrNotOwner = errors.New("this login cannot act as the schema owner")

// AsOwner runs fn in a transaction on conn acting as the schema's owner role
// (SET LOCAL ROLE), as idemctl migrate does.
func AsOwner(ctx context.Context, conn *pgx.Conn, fn func(pgx.Tx) error) error {
	roles, err := InstalledRoles(ctx, conn)
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL ROLE "+pgx.Identifier{roles.Owner}.Sanitize()); err != nil {
			return fmt.Errorf("%w (%s): %v", ErrNotOwner, roles.Owner, err)
		}
		return fn(tx)
	})
}
