// Package dbtest gives each test its own PostgreSQL database, cloned from a
// template that is migrated and has the demo ledger installed, and drops it
// when the test ends. Tests in different packages run in parallel safely.
//
// The server is TEST_DATABASE_URL, else postgres://postgres@127.0.0.1:5432/test.
package dbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemctl/idemctl/demo"
	"github.com/idemctl/idemctl/internal/db"
	"github.com/idemctl/idemctl/migrations"
)

// Prefixes of the databases this package creates; scripts/test.sh drops leftovers.
const (
	TestPrefix     = "idemctl_t_"
	TemplatePrefix = "idemctl_tpl_"
)

// AdminURL is the server tests connect to for creating databases.
func AdminURL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

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
		templateName = TemplatePrefix + migrations.Digest() + "_" + demo.Digest()
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
	if _, err := migrations.Apply(ctx, conn); err != nil {
		conn.Close(ctx)
		return fmt.Errorf("migrate template: %w", err)
	}
	if err := demo.Install(ctx, conn); err != nil {
		conn.Close(ctx)
		return fmt.Errorf("install demo in template: %w", err)
	}
	conn.Close(ctx)
	_, err = admin.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{building}.Sanitize()+" RENAME TO "+pgx.Identifier{name}.Sanitize())
	return err
}

// NewDatabase creates a fresh migrated database for t and returns its URL. It is
// dropped when t ends.
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

// NewPool returns a pool on a fresh database, closed when t ends. maxConns 0
// means the idemctl default.
func NewPool(t testing.TB, maxConns int32) (*pgxpool.Pool, string) {
	t.Helper()
	dsn := NewDatabase(t)
	pool, err := db.Open(context.Background(), dsn, db.Options{MaxConns: maxConns})
	if err != nil {
		t.Fatalf("open test pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool, dsn
}
