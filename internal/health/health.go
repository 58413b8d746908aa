// Package health answers the on-call engineer's first questions about one
// idemctl database, for idemctl's preflight, doctor and status: which
// server and login, primary or standby, which schema version, whether the
// replication, grants, partitions, sources, audit chain and quarantine are as
// they should be, and the numbers a dashboard graphs.
package health

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/idemctl/idemctl/migrations"
)

var (
	//go:embed sql/session.sql
	sessionSQL string
	//go:embed sql/versions.sql
	versionsSQL string
)

// Querier runs a query that returns one row: a pool, a connection or a
// transaction.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Schema states.
const (
	SchemaMissing    = "missing"    // no schema idem (the wrong database, or never migrated)
	SchemaUnreadable = "unreadable" // this login may not read the history (a service login)
	SchemaPresent    = "present"    // versions read
)

// Session is where a session stands.
type Session struct {
	ServerVersion string
	User          string
	Superuser     bool
	InRecovery    bool
	ReadOnly      bool
	// Schema is SchemaMissing, SchemaUnreadable or SchemaPresent; the
	// versions are set when present.
	Schema        string
	SchemaVersion int
	CodeVersion   int
}

// Probe reads where q's session stands.
func Probe(ctx context.Context, q Querier) (Session, error) {
	var s Session
	var exists, readable bool
	if err := q.QueryRow(ctx, sessionSQL).Scan(&s.ServerVersion, &s.User, &s.Superuser, &s.InRecovery, &s.ReadOnly,
		&exists, &readable); err != nil {
		return s, fmt.Errorf("check the database: %w", err)
	}
	switch {
	case !exists:
		s.Schema = SchemaMissing
	case !readable:
		s.Schema = SchemaUnreadable
	default:
		s.Schema = SchemaPresent
		if err := q.QueryRow(ctx, versionsSQL).Scan(&s.SchemaVersion, &s.CodeVersion); err != nil {
			return s, fmt.Errorf("read the schema version: %w", err)
		}
	}
	return s, nil
}

// SchemaProblem says, in one line, what is wrong with the schema for this
// binary and what to run; "" when it can be used (or cannot be read by this
// login, which then finds out on its first query).
func (s Session) SchemaProblem() string {
	want, code := migrations.SchemaVersion(), migrations.CodeVersion
	switch {
	case s.Schema == SchemaMissing:
		return "schema idem is missing: this is not an idemctl database (check --dsn and IDEMCTL_DSN), or it was never migrated (run idemctl migrate as a superuser)"
	case s.Schema != SchemaPresent:
		return ""
	case s.SchemaVersion > want || s.CodeVersion > code:
		return fmt.Sprintf("schema idem is newer than this idemctl (database: schema %03d, code package %d; this binary: %03d, %d): use an idemctl of that version or newer (idemctl version)",
			s.SchemaVersion, s.CodeVersion, want, code)
	case s.SchemaVersion < want || s.CodeVersion < code:
		return fmt.Sprintf("schema idem is older than this idemctl (database: schema %03d, code package %d; this binary: %03d, %d): run idemctl migrate as a superuser",
			s.SchemaVersion, s.CodeVersion, want, code)
	}
	return ""
}

// Role names the server's side of the session: primary, standby or a
// read-only session.
func (s Session) Role() string {
	switch {
	case s.InRecovery:
		return "standby"
	case s.ReadOnly:
		return "read-only session"
	}
	return "primary"
}
