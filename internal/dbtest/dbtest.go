// Package dbtest gives each test its own PostgreSQL database, cloned from a
// template that is migrated and has the demo ledger installed, and drops it
// when the test ends. Tests in different packages run in parallel safely.
//
// Tests connect as the role a user would have: NewPool gives an operator's
// pool; As turns a database's URL into one for a service (App), a second
// operator (Operator2), an auditor (Auditor), a login with no grant at all
// (Nobody) or the test server's superuser (Superuser). The login roles are
// created once per server (password TestPassword, so that they also work
// where TCP connections need scram); Operator maps to the person alice and
// Operator2 to bob.
//
// The server is TEST_DATABASE_URL, else postgres://postgres@127.0.0.1:5432/test.
package dbtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemctl/idemctl/demo"
	"github.com/idemctl/idemctl/internal/db"
	"github.com/idemctl/idemctl/migrations"
)

// Prefixes of the databases this package creates; scripts/test.sh drops leftovers.
const (
	TestPrefix     = "idemctl_t_"
	TemplatePrefix = "idemctl_tpl_"
)

// Role is a login a test connects as.
type Role string

// The test logins. Superuser is the test server's own user (TEST_DATABASE_URL).
const (
	Superuser Role = ""
	App       Role = "idemctl_test_app"
	Operator  Role = "idemctl_test_operator"
	Operator2 Role = "idemctl_test_operator2"
	Auditor   Role = "idemctl_test_auditor"
	Nobody    Role = "idemctl_test_nobody"
	// Unmapped is an operator login that maps to no person.
	Unmapped Role = "idemctl_test_unmapped"
	// TestPassword is every test login's password.
	TestPassword = "idemctl-test"
)

// Persons the operator logins map to.
const (
	PersonOperator  = "alice"
	PersonOperator2 = "bob"
)

// As returns dsn (a URL from NewDatabase or NewPool) with role's login; for
// Superuser, the test server's own user.
func As(dsn string, role Role) string {
	u, err := url.Parse(dsn)
	if err != nil {
		panic(fmt.Sprintf("dbtest.As: %v", err))
	}
	admin, err := url.Parse(AdminURL())
	if err != nil {
		panic(fmt.Sprintf("TEST_DATABASE_URL is not a URL: %v", err))
	}
	if role == Superuser {
		u.User = admin.User
	} else {
		u.User = url.UserPassword(string(role), TestPassword)
	}
	return u.String()
}

// AdminURL is the server tests connect to for creating databases.
func AdminURL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// templateVersion changes whenever what buildTemplate puts in the template
// does, besides the schema and the demo (logins, persons, test effects).
const templateVersion = "r3"

var (
	templateOnce sync.Once
	templateName string
	templateErr  error
)

// URLFor returns AdminURL pointed at another database.
func URLFor(database string) string {
	u, err := url.Parse(AdminURL())
	if err != nil {
		panic(fmt.Sprintf("TEST_DATABASE_URL is not a URL: %v", err))
	}
	u.Path = "/" + database
	return u.String()
}

func ensureTemplate(ctx context.Context) (string, error) {
	templateOnce.Do(func() {
		templateName = TemplatePrefix + migrations.Digest() + "_" + demo.Digest() + "_" + templateVersion
		templateErr = buildTemplate(ctx, templateName)
	})
	return templateName, templateErr
}

func buildTemplate(ctx context.Context, name string) error {
	admin, err := pgx.Connect(ctx, AdminURL())
	if err != nil {
		return fmt.Errorf("connect to test server %s: %w", db.Redact(AdminURL()), err)
	}
	defer admin.Close(ctx)
	// Packages run in parallel: one builds the template, the others wait.
	if _, err := admin.Exec(ctx, "SELECT pg_advisory_lock(hashtext('idemctl dbtest template'))"); err != nil {
		return err
	}
	defer admin.Exec(context.Background(), "SELECT pg_advisory_unlock(hashtext('idemctl dbtest template'))")
	var exists bool
	if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	building := name + "_building"
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{building}.Sanitize()+" WITH (FORCE)"); err != nil {
		return err
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{building}.Sanitize()); err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, URLFor(building))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := migrations.Apply(ctx, conn, migrations.Options{}); err != nil {
		return fmt.Errorf("migrate template: %w", err)
	}
	if err := demo.Install(ctx, conn); err != nil {
		return fmt.Errorf("install demo in template: %w", err)
	}
	if err := createLogins(ctx, conn); err != nil {
		return err
	}
	conn.Close(ctx)
	_, err = admin.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{building}.Sanitize()+" RENAME TO "+pgx.Identifier{name}.Sanitize())
	return err
}

// createLogins creates the test logins (once per server), grants them their
// group roles and maps the operators to persons in the template.
func createLogins(ctx context.Context, conn *pgx.Conn) error {
	r := migrations.DefaultRoles()
	groups := map[Role]string{App: r.App, Operator: r.Operator, Operator2: r.Operator, Auditor: r.Auditor, Nobody: "",
		Unmapped: r.Operator}
	for login, group := range groups {
		name := pgx.Identifier{string(login)}.Sanitize()
		_, err := conn.Exec(ctx, "CREATE ROLE "+name+" LOGIN PASSWORD '"+TestPassword+"'")
		var pgErr *pgconn.PgError
		if err != nil && !(errors.As(err, &pgErr) && pgErr.Code == "42710") {
			return fmt.Errorf("create test login %s: %w", login, err)
		}
		if group != "" {
			if _, err := conn.Exec(ctx, "GRANT "+pgx.Identifier{group}.Sanitize()+" TO "+name); err != nil {
				return fmt.Errorf("grant %s to %s: %w", group, login, err)
			}
		}
	}
	steps := []string{
		"DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '" + EffectRole + "') THEN CREATE ROLE " + EffectRole + " NOLOGIN; END IF; END $$",
		"CREATE SCHEMA effects AUTHORIZATION " + EffectRole,
		"GRANT USAGE ON SCHEMA effects TO " + pgx.Identifier{r.Owner}.Sanitize(),
	}
	for _, s := range steps {
		if _, err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("test effects schema: %w", err)
		}
	}
	for login, person := range map[Role]string{Operator: PersonOperator, Operator2: PersonOperator2} {
		if _, err := conn.Exec(ctx, "SET ROLE "+pgx.Identifier{r.Owner}.Sanitize()); err != nil {
			return err
		}
		if _, err := conn.Exec(ctx, "SELECT idem.person_add($1, $2)", person, string(login)); err != nil {
			return fmt.Errorf("map %s to %s: %w", login, person, err)
		}
		if _, err := conn.Exec(ctx, "RESET ROLE"); err != nil {
			return err
		}
	}
	return nil
}

// NewDatabase creates a fresh migrated database for t and returns its URL (the
// test server's superuser). It is dropped when t ends.
func NewDatabase(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tpl, err := ensureTemplate(ctx)
	if err != nil {
		t.Fatalf("test database template: %v", err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := TestPrefix + hex.EncodeToString(b[:])
	admin, err := pgx.Connect(ctx, AdminURL())
	if err != nil {
		t.Fatalf("connect to test server: %v", err)
	}
	defer admin.Close(ctx)
	for attempt := 0; ; attempt++ {
		_, err = admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+pgx.Identifier{tpl}.Sanitize())
		// Another test may be copying the same template this instant (55006).
		if err == nil || attempt == 20 {
			break
		}
		time.Sleep(time.Duration(50*(attempt+1)) * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("create test database: %v", err)
	}
	// The owner's pid and host, so that scripts/test.sh drops only the
	// leftovers of runs that are gone, never a concurrent run's databases.
	host, _ := os.Hostname()
	_, _ = admin.Exec(ctx, "COMMENT ON DATABASE "+pgx.Identifier{name}.Sanitize()+" IS "+
		quoteLiteral(fmt.Sprintf("idemctl test pid=%d host=%s", os.Getpid(), host)))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		admin, err := pgx.Connect(ctx, AdminURL())
		if err != nil {
			t.Errorf("drop test database %s: %v", name, err)
			return
		}
		defer admin.Close(ctx)
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("drop test database %s: %v", name, err)
		}
	})
	return URLFor(name)
}

// NewPool returns an operator's pool on a fresh database, and the operator's
// URL, closed when t ends. maxConns 0 means the idemctl default.
func NewPool(t testing.TB, maxConns int32) (*pgxpool.Pool, string) {
	t.Helper()
	dsn := As(NewDatabase(t), Operator)
	return PoolAs(t, dsn, Operator, maxConns), dsn
}

// PoolAs opens a pool on dsn's database as role, closed when t ends.
func PoolAs(t testing.TB, dsn string, role Role, maxConns int32) *pgxpool.Pool {
	t.Helper()
	pool, err := db.Open(context.Background(), As(dsn, role), db.Options{MaxConns: maxConns})
	if err != nil {
		t.Fatalf("open test pool as %s: %v", role, err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// EffectRole owns the effects tests register (schema effects): a role with no
// right on schema idem, as idem.register_class requires.
const EffectRole = "idemctl_test_effects"

// Admin runs sql on dsn's database as the test server's superuser: setup that
// no user of idemctl would do through it (creating a business table, tampering
// to prove that something is detected).
func Admin(t testing.TB, dsn, sql string, args ...any) {
	t.Helper()
	if err := run(dsn, "", sql, args...); err != nil {
		t.Fatalf("as superuser: %s: %v", sql, err)
	}
}

// Owner runs sql on dsn's database as the schema owner role (SET ROLE
// idem_owner from the superuser), as idemctl migrate and demo init do: class
// registration, persons.
func Owner(dsn, sql string, args ...any) error {
	return run(dsn, migrations.DefaultRoles().Owner, sql, args...)
}

func run(dsn, role, sql string, args ...any) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, As(dsn, Superuser))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if role != "" {
		if _, err := conn.Exec(ctx, "SET ROLE "+pgx.Identifier{role}.Sanitize()); err != nil {
			return err
		}
	}
	_, err = conn.Exec(ctx, sql, args...)
	return err
}

// RegisterEffect creates the SQL effect effects.NAME(t text, o text, p jsonb)
// RETURNS jsonb with body (SQL), owned by EffectRole, SECURITY DEFINER with a
// pinned search_path, and registers it as class with retention.
func RegisterEffect(t testing.TB, dsn, class, retention, name, body string) {
	t.Helper()
	fn := "effects." + pgx.Identifier{name}.Sanitize()
	Admin(t, dsn, "SET ROLE "+EffectRole+"; CREATE FUNCTION "+fn+"(t text, o text, p jsonb) RETURNS jsonb "+
		"LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, effects, pg_temp AS $body$ "+body+" $body$; "+
		"REVOKE ALL ON FUNCTION "+fn+"(text, text, jsonb) FROM PUBLIC; "+
		"GRANT EXECUTE ON FUNCTION "+fn+"(text, text, jsonb) TO "+migrations.DefaultRoles().Owner)
	if err := Owner(dsn, "SELECT idem.register_class($1, $2::regprocedure, $3)", class, fn+"(text,text,jsonb)", retention); err != nil {
		t.Fatalf("register %s: %v", class, err)
	}
}

// RegisterAppClass registers class with no SQL effect (application code:
// idem.claim, then idem.complete).
func RegisterAppClass(t testing.TB, dsn, class, retention string) {
	t.Helper()
	if err := Owner(dsn, "SELECT idem.register_class($1, NULL, $2)", class, retention); err != nil {
		t.Fatalf("register %s: %v", class, err)
	}
}

// Seed writes, as the schema owner, n applied identities tenant/prefixN of
// class with payload {"n":N} (its canonical text and hash) and response
// {"ok":true}, created from age ago on, one every spacing: history that no
// API would backdate. Day partitions for the range are created first.
func Seed(t testing.TB, dsn, class, tenant, prefix string, n int, age, spacing time.Duration) {
	t.Helper()
	first := time.Now().Add(-age).UTC().AddDate(0, 0, -1).Format("2006-01-02")
	last := time.Now().Add(-age+time.Duration(n)*spacing).UTC().AddDate(0, 0, 1).Format("2006-01-02")
	if err := Owner(dsn, "SELECT idem.inbox_body_ensure($1::date, $2::date)", first, last); err != nil {
		t.Fatalf("seed %s: partitions: %v", class, err)
	}
	SeedUnpartitioned(t, dsn, class, tenant, prefix, n, age, spacing)
}

// SeedUnpartitioned is Seed without creating partitions: days that have none
// land in the default partition, as they do when nobody schedules
// idemctl horizon maintain.
func SeedUnpartitioned(t testing.TB, dsn, class, tenant, prefix string, n int, age, spacing time.Duration) {
	t.Helper()
	err := Owner(dsn, `
		WITH rows AS (
		    SELECT $2 || g AS op, '{"n":' || g || '}' AS payload,
		           now() - make_interval(secs => $4) + g * make_interval(secs => $5) AS at
		    FROM generate_series(1, $6::int) g
		), ident AS (
		    INSERT INTO idem.identity (tenant_id, operation_id, op_class, payload_digest, created_at)
		    SELECT $1, op, $3, sha256(convert_to(payload, 'UTF8')), at FROM rows
		    RETURNING 1
		)
		INSERT INTO idem.inbox_body (tenant_id, operation_id, created_at, op_class, payload, response)
		SELECT $1, op, at, $3, payload, '{"ok":true}' FROM rows`,
		tenant, prefix, class, age.Seconds(), spacing.Seconds(), n)
	if err != nil {
		t.Fatalf("seed %s %s/%s*: %v", class, tenant, prefix, err)
	}
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// SourcePasswordEnv names the environment variable that holds, in tests, the
// password of the login postgres replay sources read with (Nobody): a
// source's DSN never carries a password, it names where the password is.
const SourcePasswordEnv = "IDEMCTL_SOURCE_TEST_PASSWORD"

// SetSourcePassword sets SourcePasswordEnv for the whole test binary: call it
// from TestMain (t.Setenv would forbid parallel tests).
func SetSourcePassword() {
	if err := os.Setenv(SourcePasswordEnv, TestPassword); err != nil {
		panic(fmt.Sprintf("dbtest: %v", err))
	}
}

// SourceDSN is dsn's database for the login postgres replay sources read
// with (Nobody: no right on schema idem, SELECT on what a test grants it),
// without its password (SourcePasswordEnv holds it).
func SourceDSN(dsn string) string {
	u, err := url.Parse(As(dsn, Nobody))
	if err != nil {
		panic(fmt.Sprintf("dbtest.SourceDSN: %v", err))
	}
	u.User = url.User(string(Nobody))
	return u.String()
}

// KeptDatabase returns the URL (superuser) of a database named prefix and the
// template's digest, cloned from the migrated template when it does not
// exist yet (fresh is then true). It is never dropped: a benchmark fills it
// once and reuses it while the schema stays the same; drop it by hand.
func KeptDatabase(t testing.TB, prefix string) (dsn string, fresh bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tpl, err := ensureTemplate(ctx)
	if err != nil {
		t.Fatalf("test database template: %v", err)
	}
	sum := sha256.Sum256([]byte(tpl))
	name := prefix + hex.EncodeToString(sum[:6])
	admin, err := pgx.Connect(ctx, AdminURL())
	if err != nil {
		t.Fatalf("connect to test server: %v", err)
	}
	defer admin.Close(ctx)
	var exists bool
	if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		t.Fatalf("kept database %s: %v", name, err)
	}
	if !exists {
		if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+pgx.Identifier{tpl}.Sanitize()); err != nil {
			t.Fatalf("create kept database %s: %v", name, err)
		}
	}
	return URLFor(name), !exists
}

// Parallel runs fn b.N times spread over conns dedicated connections of pool
// and reports operations per second (the executor benchmarks).
func Parallel(b *testing.B, pool *pgxpool.Pool, conns int, fn func(*pgxpool.Conn) error) {
	b.Helper()
	held := make([]*pgxpool.Conn, conns)
	for i := range held {
		c, err := pool.Acquire(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		held[i] = c
	}
	defer func() {
		for _, c := range held {
			c.Release()
		}
	}()
	var next atomic.Int64
	errs := make(chan error, conns)
	b.ResetTimer()
	for i := 0; i < conns; i++ {
		go func(c *pgxpool.Conn) {
			for next.Add(1) <= int64(b.N) {
				if err := fn(c); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}(held[i])
	}
	for i := 0; i < conns; i++ {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}
