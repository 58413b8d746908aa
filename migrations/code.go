package migrations

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// CodeVersion is the version of the code package this binary installs. Bump
// it in every release whose code package differs from the previous one: a
// database whose code package is newer is never downgraded (ErrSchemaNewer).
const CodeVersion = 1

// Object is one function, view or trigger of the code package, from one file
// of migrations/code. Its header names it and the kinds of user granted it:
//
//	-- object: function idem.execute(text, text, text, text, text, jsonb)
//	-- grant: app, operator
type Object struct {
	File string
	// Kind is function, view or trigger.
	Kind string
	// Identity is what DROP takes: idem.f(text) for a function, idem.v for a
	// view, "name on idem.table" for a trigger.
	Identity string
	// Grants are the kinds of user (app, operator, auditor) that may execute
	// the function or read the view.
	Grants   []string
	SQL      string
	Checksum string
}

// Key is the object's kind and identity, as recorded in idem.code_object.
func (o Object) Key() string { return o.Kind + " " + o.Identity }

var (
	objectRE = regexp.MustCompile(`(?m)^-- object: (function|view|trigger) (.+)$`)
	grantRE  = regexp.MustCompile(`(?m)^-- grant: (.+)$`)
)

// Code returns the code package's objects in installation order (by file name).
func Code() ([]Object, error) {
	entries, err := fs.ReadDir(files, "code")
	if err != nil {
		return nil, err
	}
	var out []Object
	seen := map[string]string{}
	for _, e := range entries {
		if !nameRE.MatchString(e.Name()) {
			return nil, fmt.Errorf("code file %q is not named NNN_name.sql", e.Name())
		}
		body, err := files.ReadFile(path.Join("code", e.Name()))
		if err != nil {
			return nil, err
		}
		m := objectRE.FindSubmatch(body)
		if m == nil {
			return nil, fmt.Errorf("code file %s: no '-- object: function|view|trigger NAME' header", e.Name())
		}
		o := Object{File: e.Name(), Kind: string(m[1]), Identity: strings.TrimSpace(string(m[2])), SQL: string(body), Checksum: sum(body)}
		if g := grantRE.FindSubmatch(body); g != nil {
			for _, k := range strings.Split(string(g[1]), ",") {
				k = strings.TrimSpace(k)
				if _, ok := DefaultRoles().kind(k); !ok {
					return nil, fmt.Errorf("code file %s: grant %q: use app, operator or auditor", e.Name(), k)
				}
				o.Grants = append(o.Grants, k)
			}
		}
		if prev, dup := seen[o.Key()]; dup {
			return nil, fmt.Errorf("code files %s and %s define the same %s", prev, e.Name(), o.Key())
		}
		seen[o.Key()] = e.Name()
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].File < out[j].File })
	return out, nil
}

// packageChecksum identifies the whole code package.
func packageChecksum(objs []Object) string {
	h := sha256.New()
	for _, o := range objs {
		h.Write([]byte(o.File + "\x00" + o.Checksum + "\x00"))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// installCode brings the code package in the database to this binary's, in one
// transaction: objects no longer in the package are dropped, objects whose
// file changed are re-created, every object's grants are set again, the
// generated dispatcher is rebuilt and the coming days' partitions created.
// It returns the objects installed and dropped.
func installCode(ctx context.Context, conn *pgx.Conn, objs []Object, r Roles) (installed, dropped []string, err error) {
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		recorded, err := loadObjects(ctx, tx)
		if err != nil {
			return err
		}
		want := map[string]bool{}
		for _, o := range objs {
			want[o.Key()] = true
		}
		for key := range recorded {
			if want[key] {
				continue
			}
			if _, err := tx.Exec(ctx, "DROP "+strings.Replace(key, " ", " IF EXISTS ", 1)); err != nil {
				return fmt.Errorf("drop %s (no longer in the code package): %w", key, err)
			}
			if _, err := tx.Exec(ctx, "DELETE FROM idem.code_object WHERE object = $1", key); err != nil {
				return err
			}
			dropped = append(dropped, key)
		}
		for _, o := range objs {
			if recorded[o.Key()] == o.Checksum {
				continue
			}
			if err := createObject(ctx, tx, o); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO idem.code_object (object, file, checksum) VALUES ($1, $2, $3)
				ON CONFLICT (object) DO UPDATE SET file = EXCLUDED.file, checksum = EXCLUDED.checksum, installed_at = now()`,
				o.Key(), o.File, o.Checksum); err != nil {
				return err
			}
			installed = append(installed, o.Key())
		}
		for _, o := range objs {
			if err := grantObject(ctx, tx, o, r); err != nil {
				return err
			}
		}
		return finishCode(ctx, tx, objs, r)
	})
	return installed, dropped, err
}

// createObject runs an object's file. CREATE OR REPLACE cannot change a
// function's result type or a view's columns: then the old one is dropped
// first, in a savepoint, and the file run again.
func createObject(ctx context.Context, tx pgx.Tx, o Object) error {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return err
	}
	_, err = sp.Exec(ctx, o.SQL)
	var pgErr *pgconn.PgError
	if err != nil && errors.As(err, &pgErr) && (pgErr.Code == "42P13" || pgErr.Code == "42P16" || pgErr.Code == "42809") {
		_ = sp.Rollback(ctx)
		if _, derr := tx.Exec(ctx, "DROP "+strings.Replace(o.Key(), " ", " IF EXISTS ", 1)); derr != nil {
			return fmt.Errorf("install %s: %w; dropping the old one first: %v", o.File, err, derr)
		}
		if _, err := tx.Exec(ctx, o.SQL); err != nil {
			return fmt.Errorf("install %s: %w", o.File, err)
		}
		return nil
	}
	if err != nil {
		_ = sp.Rollback(ctx)
		return fmt.Errorf("install %s: %w", o.File, err)
	}
	return sp.Commit(ctx)
}

// grantObject leaves exactly the grants the object's header names: nobody
// else, PUBLIC included, may execute a function or read a view.
func grantObject(ctx context.Context, tx pgx.Tx, o Object, r Roles) error {
	var on, priv string
	switch o.Kind {
	case "function":
		on, priv = "FUNCTION "+o.Identity, "EXECUTE"
	case "view":
		on, priv = o.Identity, "SELECT"
	default:
		return nil
	}
	others := []string{"PUBLIC", quote(r.App), quote(r.Operator), quote(r.Auditor)}
	if _, err := tx.Exec(ctx, "REVOKE ALL ON "+on+" FROM "+strings.Join(others, ", ")); err != nil {
		return fmt.Errorf("revoke %s: %w", o.Key(), err)
	}
	for _, k := range o.Grants {
		role, _ := r.kind(k)
		if _, err := tx.Exec(ctx, "GRANT "+priv+" ON "+on+" TO "+quote(role)); err != nil {
			return fmt.Errorf("grant %s to %s: %w", o.Key(), role, err)
		}
	}
	return nil
}

// finishCode rebuilds what the package generates, sets the schema's table
// grants and records the package.
func finishCode(ctx context.Context, tx pgx.Tx, objs []Object, r Roles) error {
	readers := quote(r.Operator) + ", " + quote(r.Auditor)
	everyone := quote(r.App) + ", " + readers
	stmts := []string{
		"SELECT idem.rebuild_dispatch()",
		"SELECT idem.inbox_body_ensure((now() AT TIME ZONE 'UTC')::date, (now() AT TIME ZONE 'UTC')::date + 7)",
		"REVOKE ALL ON SCHEMA idem FROM PUBLIC",
		"GRANT USAGE ON SCHEMA idem TO " + everyone,
		"REVOKE ALL ON ALL TABLES IN SCHEMA idem FROM PUBLIC, " + everyone,
		"REVOKE ALL ON ALL SEQUENCES IN SCHEMA idem FROM PUBLIC, " + everyone,
		"GRANT SELECT ON ALL TABLES IN SCHEMA idem TO " + readers,
	}
	for _, s := range stmts {
		if _, err := tx.Exec(ctx, s); err != nil {
			return fmt.Errorf("install code package: %s: %w", s, err)
		}
	}
	// Views were just revoked from the readers with the tables: grant them again.
	for _, o := range objs {
		if o.Kind == "view" {
			if err := grantObject(ctx, tx, o, r); err != nil {
				return err
			}
		}
	}
	roles, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO idem.code_package (version, checksum, roles) VALUES ($1, $2, $3)
		ON CONFLICT (singleton) DO UPDATE SET version = EXCLUDED.version, checksum = EXCLUDED.checksum,
		    roles = EXCLUDED.roles, installed_at = now()
		WHERE (idem.code_package.version, idem.code_package.checksum) IS DISTINCT FROM (EXCLUDED.version, EXCLUDED.checksum)`,
		CodeVersion, packageChecksum(objs), roles)
	return err
}

func loadObjects(ctx context.Context, tx pgx.Tx) (map[string]string, error) {
	rows, err := tx.Query(ctx, "SELECT object, checksum FROM idem.code_object")
	if err != nil {
		return nil, fmt.Errorf("read code package: %w", err)
	}
	out := map[string]string{}
	for rows.Next() {
		var k, c string
		if err := rows.Scan(&k, &c); err != nil {
			return nil, err
		}
		out[k] = c
	}
	return out, rows.Err()
}

func quote(name string) string { return pgx.Identifier{name}.Sanitize() }

// PackageChecksum identifies this binary's code package (what
// idem.code_package.checksum records).
func PackageChecksum() (string, error) {
	objs, err := Code()
	if err != nil {
		return "", err
	}
	return packageChecksum(objs), nil
}
