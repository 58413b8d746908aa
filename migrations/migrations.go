// Package migrations holds idemctl's schema and installs it. The schema has
// two parts, both embedded in the binary:
//
//   - numbered migrations (NNN_name.sql): the tables, applied once each, in
//     order, each in its own transaction, and never edited once released;
//   - the code package (code/NNN_name.sql): every function, view and trigger,
//     one object a file, re-installed whole whenever its checksum changes.
//
// Apply runs under a PostgreSQL advisory lock, so two operators migrating at
// once cannot interleave, with statement_timeout off and a lock_timeout, and
// creates everything as the schema owner role (see Roles), never as the
// connecting superuser. A binary never installs an older schema or code
// package over a newer one: it refuses and says which version it needs.
package migrations

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

//go:embed *.sql code/*.sql
var files embed.FS

// lockKey is the advisory lock taken while migrating ("idemctl" in ASCII, folded).
const lockKey int64 = 0x6964656d63746c

// Migration is one numbered schema change.
type Migration struct {
	Version  int
	Name     string
	SQL      string
	Checksum string
}

// Applied is a migration as recorded in the database.
type Applied struct {
	Version   int
	Name      string
	Checksum  string
	AppliedAt time.Time
}

// StatusRow pairs a known migration with its state in the database.
type StatusRow struct {
	Migration
	AppliedAt *time.Time
	// Drifted is true when the recorded checksum differs from the embedded file.
	Drifted bool
}

// Errors of Apply and Status.
var (
	// ErrDrift: a migration recorded in the database differs from the one in
	// this binary (someone edited an applied migration, or the binaries differ).
	ErrDrift = errors.New("applied migration differs from this binary")
	// ErrSchemaNewer: the database holds migrations or a code package newer
	// than this binary knows; an older binary never installs over them.
	ErrSchemaNewer = errors.New("the schema is newer than this binary")
	// ErrNotInstallable: the database cannot take the schema as it is (not
	// UTF-8, a standby, a schema idem owned by another role, a superuser
	// owner role, missing rights to create roles).
	ErrNotInstallable = errors.New("cannot install the idem schema here")
)

var nameRE = regexp.MustCompile(`^(\d{3})_([a-z0-9_]+)\.sql$`)

// All returns the embedded migrations in version order.
func All() ([]Migration, error) {
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		m := nameRE.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("migration file %q is not named NNN_name.sql", e.Name())
		}
		body, err := files.ReadFile(e.Name())
		if err != nil {
			return nil, err
		}
		v, _ := strconv.Atoi(m[1])
		out = append(out, Migration{Version: v, Name: m[2], SQL: string(body), Checksum: sum(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("two migrations numbered %03d", out[i].Version)
		}
	}
	return out, nil
}

// SchemaVersion is the highest migration this binary knows.
func SchemaVersion() int {
	all, err := All()
	if err != nil || len(all) == 0 {
		return 0
	}
	return all[len(all)-1].Version
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Digest identifies the whole embedded schema (migrations and code package);
// tests use it to name templates.
func Digest() string {
	all, err := All()
	if err != nil {
		return "invalid"
	}
	objs, err := Code()
	if err != nil {
		return "invalid"
	}
	// Numbers and names count, not only contents: a migration renumbered
	// (at a merge) must not reuse a template recorded under its old number.
	h := sha256.New()
	for _, m := range all {
		fmt.Fprintf(h, "%03d_%s %s\n", m.Version, m.Name, m.Checksum)
	}
	for _, o := range objs {
		fmt.Fprintf(h, "%s %s\n", o.Key(), o.Checksum)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// bootstrap creates the bookkeeping tables, as the schema owner.
const bootstrap = `
CREATE TABLE IF NOT EXISTS idem.schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS idem.code_package (
    singleton    boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    version      integer NOT NULL,
    checksum     text NOT NULL,
    roles        jsonb NOT NULL,
    installed_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS idem.code_object (
    object     text PRIMARY KEY,
    file       text NOT NULL,
    checksum   text NOT NULL,
    installed_at timestamptz NOT NULL DEFAULT now()
)`

// Options tune Apply.
type Options struct {
	// Roles names the roles the schema is owned by and granted to
	// (DefaultRoles when zero).
	Roles Roles
	// LockTimeout bounds how long one statement waits for a lock (a busy
	// table): the migration fails rather than queue every executor call
	// behind it. 0 means 10s.
	LockTimeout time.Duration
	// NoDistribute leaves the tables of a Citus coordinator where they are
	// (plain tables on the coordinator); a later Apply without it distributes
	// them. It changes nothing on plain PostgreSQL.
	NoDistribute bool
	// ShardCount is the number of shards of the distributed tables when they
	// are first distributed (0: the cluster's citus.shard_count).
	ShardCount int
}

// Report is what Apply did.
type Report struct {
	// RolesCreated are the roles that did not exist.
	RolesCreated []string `json:"roles_created"`
	// Applied are the numbered migrations applied by this run.
	Applied []Migration `json:"-"`
	// CodeInstalled and CodeDropped are the code package's objects
	// (re)installed and removed by this run.
	CodeInstalled []string `json:"code_installed"`
	CodeDropped   []string `json:"code_dropped"`
	// SchemaVersion and CodeVersion are what the database now holds.
	SchemaVersion int `json:"schema_version"`
	CodeVersion   int `json:"code_version"`
	// Citus is what the run did on a Citus coordinator; nil elsewhere.
	Citus *CitusReport `json:"citus,omitempty"`
}

// Apply brings the schema up to date: roles, the numbered migrations, the
// code package, the grants, then a check of every privilege in the schema.
// It holds an advisory lock on conn for the whole run; concurrent runs wait
// and then find nothing left to do.
func Apply(ctx context.Context, conn *pgx.Conn, o Options) (Report, error) {
	var rep Report
	if o.Roles == (Roles{}) {
		o.Roles = DefaultRoles()
	}
	if err := o.Roles.Validate(); err != nil {
		return rep, err
	}
	if o.LockTimeout <= 0 {
		o.LockTimeout = 10 * time.Second
	}
	all, err := All()
	if err != nil {
		return rep, err
	}
	objs, err := Code()
	if err != nil {
		return rep, err
	}
	// A migration may take long on a big table: no statement timeout, but a
	// lock timeout so that it never queues the executor behind it for long.
	if _, err := conn.Exec(ctx, fmt.Sprintf("SET statement_timeout = 0; SET lock_timeout = %d", o.LockTimeout.Milliseconds())); err != nil {
		return rep, fmt.Errorf("set migration timeouts: %w", err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lockKey); err != nil {
		return rep, fmt.Errorf("take migration lock: %w", err)
	}
	defer func() {
		// A fresh context: the lock must be released even if ctx is done.
		_, _ = conn.Exec(context.Background(), "RESET ROLE")
		_, _ = conn.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", lockKey)
	}()
	if rep.RolesCreated, err = prepare(ctx, conn, o.Roles); err != nil {
		return rep, err
	}
	if rep.Citus, err = citusPrepare(ctx, conn, o.Roles); err != nil {
		return rep, err
	}
	if _, err := conn.Exec(ctx, "SET ROLE "+pgx.Identifier{o.Roles.Owner}.Sanitize()); err != nil {
		return rep, fmt.Errorf("%w: SET ROLE %s: %v", ErrNotInstallable, o.Roles.Owner, err)
	}
	if _, err := conn.Exec(ctx, bootstrap); err != nil {
		return rep, fmt.Errorf("create migration history: %w", err)
	}
	if err := checkVersions(ctx, conn, all, o.Roles); err != nil {
		return rep, err
	}
	if rep.Applied, err = applyMigrations(ctx, conn, all); err != nil {
		return rep, err
	}
	if rep.CodeInstalled, rep.CodeDropped, err = installCode(ctx, conn, objs, o.Roles); err != nil {
		return rep, err
	}
	distribute := rep.Citus != nil && !o.NoDistribute
	if distribute {
		if err := asSuperuser(ctx, conn, o.Roles, func() error { return citusTables(ctx, conn, o.ShardCount, rep.Citus) }); err != nil {
			return rep, err
		}
		// Again, for the functions citusTables marked.
		again, _, err := installCode(ctx, conn, objs, o.Roles)
		if err != nil {
			return rep, err
		}
		rep.CodeInstalled = append(rep.CodeInstalled, again...)
	}
	if err := tunePlans(ctx, conn); err != nil {
		return rep, err
	}
	if _, err := conn.Exec(ctx, "RESET ROLE"); err != nil {
		return rep, err
	}
	if err := grantWALDir(ctx, conn, o.Roles); err != nil {
		return rep, err
	}
	if distribute {
		if err := citusFunctions(ctx, conn, o.Roles, rep.Citus); err != nil {
			return rep, err
		}
	}
	problems, err := Check(ctx, conn, o.Roles)
	if err != nil {
		return rep, err
	}
	if len(problems) > 0 {
		return rep, fmt.Errorf("%w: privileges in schema idem are not as installed: %s (run idemctl migrate as a superuser to repair)",
			ErrNotInstallable, problems[0])
	}
	rep.SchemaVersion, rep.CodeVersion = SchemaVersion(), CodeVersion
	return rep, nil
}

// settingFreeFunctions are executor helpers that once carried a function
// setting (plan_cache_mode = force_generic_plan on idem.settle, when it read
// the day-partitioned bodies by parameters; the generated
// idem.inbox_body_read probes one partition now). A function setting costs a
// GUC save and restore on every call of the executor's hot path, so an
// upgrade removes it.
var settingFreeFunctions = []string{"idem.settle(text, text, text, text, text, jsonb, boolean)"}

// tunePlans removes plan_cache_mode from settingFreeFunctions, after every
// install of the code package, on plain PostgreSQL and on Citus alike.
func tunePlans(ctx context.Context, conn *pgx.Conn) error {
	for _, fn := range settingFreeFunctions {
		if _, err := conn.Exec(ctx, "ALTER FUNCTION "+fn+" RESET plan_cache_mode"); err != nil {
			return fmt.Errorf("plan settings of %s: %w", fn, err)
		}
	}
	return nil
}

// asSuperuser runs fn as the connecting login (RESET ROLE), then acts as the
// owner role again.
func asSuperuser(ctx context.Context, conn *pgx.Conn, r Roles, fn func() error) error {
	if _, err := conn.Exec(ctx, "RESET ROLE"); err != nil {
		return err
	}
	if err := fn(); err != nil {
		return err
	}
	_, err := conn.Exec(ctx, "SET ROLE "+pgx.Identifier{r.Owner}.Sanitize())
	return err
}

func applyMigrations(ctx context.Context, conn *pgx.Conn, all []Migration) ([]Migration, error) {
	applied, err := loadApplied(ctx, conn)
	if err != nil {
		return nil, err
	}
	var done []Migration
	for _, m := range all {
		if a, ok := applied[m.Version]; ok {
			if a.Checksum != m.Checksum {
				return done, fmt.Errorf("migration %03d_%s: %w (recorded %s, binary %s)", m.Version, m.Name, ErrDrift,
					short(a.Checksum), short(m.Checksum))
			}
			continue
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO idem.schema_migrations (version, name, checksum) VALUES ($1, $2, $3)", m.Version, m.Name, m.Checksum)
			return err
		})
		if err != nil {
			return done, fmt.Errorf("apply migration %03d_%s: %w", m.Version, m.Name, err)
		}
		done = append(done, m)
	}
	return done, nil
}

// short abbreviates a checksum for messages, whatever its length.
func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

// Status reports every known migration and whether it is applied.
func Status(ctx context.Context, conn *pgx.Conn) ([]StatusRow, error) {
	all, err := All()
	if err != nil {
		return nil, err
	}
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass('idem.schema_migrations') IS NOT NULL").Scan(&exists); err != nil {
		return nil, fmt.Errorf("read migration history: %w", err)
	}
	applied := map[int]Applied{}
	if exists {
		if applied, err = loadApplied(ctx, conn); err != nil {
			return nil, err
		}
	}
	rows := make([]StatusRow, 0, len(all))
	for _, m := range all {
		r := StatusRow{Migration: m}
		if a, ok := applied[m.Version]; ok {
			at := a.AppliedAt
			r.AppliedAt = &at
			r.Drifted = a.Checksum != m.Checksum
		}
		rows = append(rows, r)
	}
	return rows, nil
}

func loadApplied(ctx context.Context, conn *pgx.Conn) (map[int]Applied, error) {
	rows, err := conn.Query(ctx, "SELECT version, name, checksum, applied_at FROM idem.schema_migrations")
	if err != nil {
		return nil, fmt.Errorf("read migration history: %w", err)
	}
	out := map[int]Applied{}
	for rows.Next() {
		var a Applied
		if err := rows.Scan(&a.Version, &a.Name, &a.Checksum, &a.AppliedAt); err != nil {
			return nil, err
		}
		out[a.Version] = a
	}
	return out, rows.Err()
}
