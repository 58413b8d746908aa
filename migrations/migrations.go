// Package migrations holds idemctl's schema as numbered SQL files (NNN_name.sql)
// embedded in the binary, and applies them under a PostgreSQL advisory lock so
// that two operators migrating at once cannot interleave.
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

//go:embed *.sql
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

// ErrDrift means a migration recorded in the database differs from the one in
// this binary: someone edited an applied migration, or the binaries differ.
var ErrDrift = errors.New("applied migration differs from this binary")

var nameRE = regexp.MustCompile(`^(\d{3})_([a-z0-9_]+)\.sql$`)

// All returns the embedded migrations in version order.
func All() ([]Migration, error) {
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, e := range entries {
		m := nameRE.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("migration file %q is not named NNN_name.sql", e.Name())
		}
		body, err := files.ReadFile(e.Name())
		if err != nil {
			return nil, err
		}
		v, _ := strconv.Atoi(m[1])
		sum := sha256.Sum256(body)
		out = append(out, Migration{Version: v, Name: m[2], SQL: string(body), Checksum: hex.EncodeToString(sum[:])})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("two migrations numbered %03d", out[i].Version)
		}
	}
	return out, nil
}

// Digest identifies the whole embedded schema; tests use it to name templates.
func Digest() string {
	all, err := All()
	if err != nil {
		return "invalid"
	}
	h := sha256.New()
	for _, m := range all {
		h.Write([]byte(m.Checksum))
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

const createHistory = `
CREATE SCHEMA IF NOT EXISTS idem;
CREATE TABLE IF NOT EXISTS idem.schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)`

// Apply brings the schema up to date and returns the migrations it applied.
// Each migration runs in its own transaction; the whole run holds an advisory
// lock on a dedicated connection, so concurrent runs wait and then find nothing
// left to do.
func Apply(ctx context.Context, conn *pgx.Conn) ([]Migration, error) {
	all, err := All()
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lockKey); err != nil {
		return nil, fmt.Errorf("take migration lock: %w", err)
	}
	defer func() {
		// A fresh context: the lock must be released even if ctx is done.
		_, _ = conn.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", lockKey)
	}()
	if _, err := conn.Exec(ctx, createHistory); err != nil {
		return nil, fmt.Errorf("create migration history: %w", err)
	}
	applied, err := loadApplied(ctx, conn)
	if err != nil {
		return nil, err
	}
	var done []Migration
	for _, m := range all {
		if a, ok := applied[m.Version]; ok {
			if a.Checksum != m.Checksum {
				return done, fmt.Errorf("migration %03d_%s: %w (recorded %s, binary %s)", m.Version, m.Name, ErrDrift, a.Checksum[:12], m.Checksum[:12])
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
